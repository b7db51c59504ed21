//! `cjson`: Lua CJSON 2.1's `encode`, `decode`, `null` and settings, as Redis loads them.
//!
//! Hand-written: no crate gives Lua CJSON's semantics for mlua, and they are what scripts
//! depend on (which tables are arrays, sparse-array refusal, `%.14g` numbers, `\/` in
//! strings, `cjson.null`). Both directions bound their nesting (`encode_max_depth` and
//! `decode_max_depth`, 1000 by default as in CJSON, at most [`MAX_DEPTH`]), so a hostile
//! payload is an error, not a deep recursion; the decoder walks the input once and
//! allocates only the values it builds.

use super::fmt_g;
use mlua::{LightUserData, Lua, Result, String as LuaString, Table, Value};
use parking_lot::Mutex;
use std::sync::Arc;

/// Deepest nesting a setting may allow (CJSON takes any number; recursion here is bounded).
pub const MAX_DEPTH: usize = 1000;

#[derive(Clone, Copy)]
struct Config {
    sparse_convert: bool,
    sparse_ratio: usize,
    sparse_safe: usize,
    encode_depth: usize,
    decode_depth: usize,
    precision: usize,
    encode_invalid: bool,
    decode_invalid: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            sparse_convert: false,
            sparse_ratio: 2,
            sparse_safe: 10,
            encode_depth: MAX_DEPTH,
            decode_depth: MAX_DEPTH,
            precision: 14,
            encode_invalid: false,
            decode_invalid: true,
        }
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(mlua::Error::RuntimeError(msg.into()))
}

/// `cjson.null`: a light userdata holding NULL, as CJSON's.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

fn escape(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            c if c < 0x20 || c == 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            c => out.push(c),
        }
    }
    out.push(b'"');
}

struct Encoder {
    cfg: Config,
    out: Vec<u8>,
}

impl Encoder {
    fn number(&mut self, n: f64) -> Result<()> {
        if n.is_nan() || n.is_infinite() {
            if !self.cfg.encode_invalid {
                return err("Cannot serialise number: must not be NaN or Inf");
            }
            let s = if n.is_nan() {
                "NaN"
            } else if n > 0.0 {
                "Infinity"
            } else {
                "-Infinity"
            };
            self.out.extend_from_slice(s.as_bytes());
            return Ok(());
        }
        self.out
            .extend_from_slice(fmt_g(n, self.cfg.precision).as_bytes());
        Ok(())
    }

    /// The length of `t` as an array, or `None` if it is to be an object.
    fn array_len(&self, t: &Table) -> Result<Option<usize>> {
        let (mut max, mut items) = (0usize, 0usize);
        for pair in t.clone().pairs::<Value, Value>() {
            let (k, _) = pair?;
            let n = match k {
                Value::Integer(i) => i as f64,
                Value::Number(n) => n,
                _ => return Ok(None),
            };
            if n < 1.0 || n.fract() != 0.0 || n > usize::MAX as f64 {
                return Ok(None);
            }
            max = max.max(n as usize);
            items += 1;
        }
        let c = &self.cfg;
        if c.sparse_ratio > 0 && max > items.saturating_mul(c.sparse_ratio) && max > c.sparse_safe {
            if !c.sparse_convert {
                return err("Cannot serialise table: excessively sparse array");
            }
            return Ok(None);
        }
        Ok(Some(max))
    }

    fn value(&mut self, v: Value, depth: usize) -> Result<()> {
        match v {
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            Value::Boolean(b) => self
                .out
                .extend_from_slice(if b { b"true" } else { b"false" }),
            Value::Integer(i) => self.number(i as f64)?,
            Value::Number(n) => self.number(n)?,
            Value::String(s) => escape(&mut self.out, &s.as_bytes()),
            Value::Table(t) => {
                let depth = depth + 1;
                if depth > self.cfg.encode_depth {
                    return err(format!("Cannot serialise, excessive nesting ({depth})"));
                }
                match self.array_len(&t)? {
                    Some(len) if len > 0 => {
                        self.out.push(b'[');
                        for i in 1..=len {
                            if i > 1 {
                                self.out.push(b',');
                            }
                            self.value(t.raw_get(i)?, depth)?;
                        }
                        self.out.push(b']');
                    }
                    _ => {
                        self.out.push(b'{');
                        let mut first = true;
                        for pair in t.pairs::<Value, Value>() {
                            let (k, v) = pair?;
                            if !first {
                                self.out.push(b',');
                            }
                            first = false;
                            match k {
                                Value::String(s) => escape(&mut self.out, &s.as_bytes()),
                                Value::Integer(_) | Value::Number(_) => {
                                    self.out.push(b'"');
                                    self.value(k, depth)?;
                                    self.out.push(b'"');
                                }
                                other => {
                                    return err(format!(
                                        "Cannot serialise {}: table key must be a number or string",
                                        other.type_name()
                                    ))
                                }
                            }
                            self.out.push(b':');
                            self.value(v, depth)?;
                        }
                        self.out.push(b'}');
                    }
                }
            }
            other => {
                return err(format!(
                    "Cannot serialise {}: type not supported",
                    other.type_name()
                ))
            }
        }
        Ok(())
    }
}

struct Decoder<'a> {
    lua: &'a Lua,
    s: &'a [u8],
    at: usize,
    max_depth: usize,
    invalid_numbers: bool,
}

impl Decoder<'_> {
    fn ws(&mut self) {
        while self
            .s
            .get(self.at)
            .is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r'))
        {
            self.at += 1;
        }
    }

    fn fail<T>(&self, expected: &str) -> Result<T> {
        let found = if self.at >= self.s.len() {
            "the end"
        } else {
            "invalid token"
        };
        err(format!(
            "Expected {expected} but found {found} at character {}",
            self.at + 1
        ))
    }

    fn literal(&mut self, word: &[u8]) -> bool {
        if self.s[self.at..].starts_with(word) {
            self.at += word.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Result<Value> {
        self.ws();
        let Some(&c) = self.s.get(self.at) else {
            return self.fail("value");
        };
        match c {
            b'{' | b'[' => {
                let depth = depth + 1;
                if depth > self.max_depth {
                    return err(format!(
                        "Found too many nested data structures ({depth}) at character {}",
                        self.at + 1
                    ));
                }
                self.at += 1;
                let t = self.lua.create_table()?;
                let close = if c == b'{' { b'}' } else { b']' };
                self.ws();
                if self.s.get(self.at) == Some(&close) {
                    self.at += 1;
                    return Ok(Value::Table(t));
                }
                let mut n = 0;
                loop {
                    if c == b'{' {
                        self.ws();
                        if self.s.get(self.at) != Some(&b'"') {
                            return self.fail("object key string");
                        }
                        let k = self.string()?;
                        self.ws();
                        if self.s.get(self.at) != Some(&b':') {
                            return self.fail("colon");
                        }
                        self.at += 1;
                        let v = self.value(depth)?;
                        t.raw_set(k, v)?;
                    } else {
                        n += 1;
                        let v = self.value(depth)?;
                        t.raw_set(n, v)?;
                    }
                    self.ws();
                    match self.s.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(&x) if x == close => {
                            self.at += 1;
                            return Ok(Value::Table(t));
                        }
                        _ if c == b'{' => return self.fail("comma or object end"),
                        _ => return self.fail("comma or array end"),
                    }
                }
            }
            b'"' => Ok(Value::String(self.string()?)),
            b't' if self.literal(b"true") => Ok(Value::Boolean(true)),
            b'f' if self.literal(b"false") => Ok(Value::Boolean(false)),
            b'n' if self.literal(b"null") => Ok(null()),
            _ => self.number(),
        }
    }

    fn number(&mut self) -> Result<Value> {
        let start = self.at;
        while self
            .s
            .get(self.at)
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
        {
            self.at += 1;
        }
        let token = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
        let lower = token.to_ascii_lowercase();
        let special = lower.contains("inf") || lower.contains("nan") || lower.contains('x');
        let n = if special && !self.invalid_numbers {
            None
        } else if let Some(hex) = lower.strip_prefix("0x") {
            u64::from_str_radix(hex, 16).ok().map(|n| n as f64)
        } else if let Some(hex) = lower.strip_prefix("-0x") {
            u64::from_str_radix(hex, 16).ok().map(|n| -(n as f64))
        } else {
            token.parse::<f64>().ok()
        };
        match n {
            Some(n) if !token.is_empty() => Ok(Value::Number(n)),
            _ => {
                self.at = start;
                self.fail("value")
            }
        }
    }

    fn hex4(&mut self) -> Result<u32> {
        let h = self
            .s
            .get(self.at..self.at + 4)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u32::from_str_radix(h, 16).ok());
        match h {
            Some(v) => {
                self.at += 4;
                Ok(v)
            }
            None => err(format!(
                "Expected value but found invalid unicode escape code at character {}",
                self.at + 1
            )),
        }
    }

    fn string(&mut self) -> Result<LuaString> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&c) = self.s.get(self.at) else {
                return err(format!(
                    "Expected value but found unexpected end of string at character {}",
                    self.at + 1
                ));
            };
            self.at += 1;
            match c {
                b'"' => return self.lua.create_string(&out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.at) else {
                        continue;
                    };
                    self.at += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xd800..0xdc00).contains(&cp)
                                && self.s[self.at..].starts_with(b"\\u")
                            {
                                self.at += 2;
                                let low = self.hex4()?;
                                cp = 0x10000
                                    + ((cp - 0xd800) << 10)
                                    + (low.wrapping_sub(0xdc00) & 0x3ff);
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                c if c < 0x20 => {
                    return err(format!(
                        "Expected value but found invalid token at character {}",
                        self.at
                    ))
                }
                c => out.push(c),
            }
        }
    }
}

/// A depth setting's argument: absent keeps it, else 1..=[`MAX_DEPTH`].
fn depth_arg(name: &str, v: Option<i64>, cur: &mut usize) -> Result<usize> {
    if let Some(n) = v {
        if n < 1 || n as usize > MAX_DEPTH {
            return err(format!(
                "bad argument #1 to '{name}' (expected integer between 1 and {MAX_DEPTH})"
            ));
        }
        *cur = n as usize;
    }
    Ok(*cur)
}

/// The `cjson` table; its settings live as long as the interpreter.
pub fn open(lua: &Lua) -> Result<Table> {
    let cfg = Arc::new(Mutex::new(Config::default()));
    let t = lua.create_table()?;
    let c = cfg.clone();
    t.set(
        "encode",
        lua.create_function(move |lua, v: Value| {
            let mut e = Encoder {
                cfg: *c.lock(),
                out: Vec::new(),
            };
            e.value(v, 0)?;
            lua.create_string(&e.out)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, s: LuaString| {
            let bytes = s.as_bytes();
            let cfg = *c.lock();
            let mut d = Decoder {
                lua,
                s: &bytes,
                at: 0,
                max_depth: cfg.decode_depth,
                invalid_numbers: cfg.decode_invalid,
            };
            let v = d.value(0)?;
            d.ws();
            if d.at != bytes.len() {
                return d.fail("the end");
            }
            Ok(v)
        })?,
    )?;
    t.set("null", null())?;
    t.set("_NAME", "cjson")?;
    t.set("_VERSION", "2.1.0")?;
    let c = cfg.clone();
    t.set(
        "encode_max_depth",
        lua.create_function(move |_, n: Option<i64>| {
            depth_arg("encode_max_depth", n, &mut c.lock().encode_depth)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "decode_max_depth",
        lua.create_function(move |_, n: Option<i64>| {
            depth_arg("decode_max_depth", n, &mut c.lock().decode_depth)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_number_precision",
        lua.create_function(move |_, n: Option<i64>| {
            let mut g = c.lock();
            if let Some(n) = n {
                if !(1..=14).contains(&n) {
                    return err("bad argument #1 to 'encode_number_precision' (expected integer between 1 and 14)");
                }
                g.precision = n as usize;
            }
            Ok(g.precision)
        })?,
    )?;
    let c = cfg.clone();
    t.set(
        "encode_sparse_array",
        lua.create_function(
            move |_, (conv, ratio, safe): (Option<bool>, Option<i64>, Option<i64>)| {
                let mut g = c.lock();
                if let Some(b) = conv {
                    g.sparse_convert = b;
                }
                if let Some(r) = ratio {
                    g.sparse_ratio = r.max(0) as usize;
                }
                if let Some(s) = safe {
                    g.sparse_safe = s.max(0) as usize;
                }
                Ok((g.sparse_convert, g.sparse_ratio, g.sparse_safe))
            },
        )?,
    )?;
    let flag = |get: fn(&mut Config) -> &mut bool| {
        let c = cfg.clone();
        move |_: &Lua, v: Option<Value>| {
            let mut g = c.lock();
            let slot = get(&mut g);
            match v {
                Some(Value::Boolean(b)) => *slot = b,
                Some(Value::String(s)) if s.as_bytes().as_ref() == b"on" => *slot = true,
                Some(Value::String(s)) if s.as_bytes().as_ref() == b"off" => *slot = false,
                Some(Value::Nil) | None => {}
                Some(_) => return err("bad argument #1 (invalid option)"),
            }
            Ok(*slot)
        }
    };
    t.set(
        "encode_invalid_numbers",
        lua.create_function(flag(|c| &mut c.encode_invalid))?,
    )?;
    t.set(
        "decode_invalid_numbers",
        lua.create_function(flag(|c| &mut c.decode_invalid))?,
    )?;
    // CJSON's buffer reuse is an allocation detail; the setting is accepted and kept.
    let keep = Arc::new(Mutex::new(true));
    t.set(
        "encode_keep_buffer",
        lua.create_function(move |_, v: Option<bool>| {
            let mut g = keep.lock();
            if let Some(b) = v {
                *g = b;
            }
            Ok(*g)
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().set("cjson", open(&lua).unwrap()).unwrap();
        lua
    }

    fn eval(src: &str) -> String {
        lua().load(src).eval::<String>().unwrap()
    }

    #[test]
    fn encodes_as_cjson() {
        assert_eq!(eval("return cjson.encode({1,2,'a/b'})"), r#"[1,2,"a\/b"]"#);
        assert_eq!(eval("return cjson.encode({})"), "{}");
        assert_eq!(eval("return cjson.encode({a=cjson.null})"), r#"{"a":null}"#);
        assert_eq!(eval("return cjson.encode(0.1)"), "0.1");
        assert_eq!(eval("return cjson.encode(1e20)"), "1e+20");
        assert_eq!(eval("return cjson.encode({[1]=1,[3]=3})"), "[1,null,3]");
        assert!(lua().load("return cjson.encode({[100]=1})").exec().is_err());
        assert!(lua()
            .load("return cjson.encode({[true]=1})")
            .exec()
            .is_err());
        assert!(lua().load("return cjson.encode(0/0)").exec().is_err());
    }

    #[test]
    fn decodes_as_cjson() {
        assert_eq!(
            eval(
                r#"return table.concat(cjson.decode("[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]"), " ")"#
            ),
            "0 -5000 -1 0.0003 1023.2 0"
        );
        assert_eq!(
            eval(r#"return cjson.decode([[{"a":"\u00e9\n"}]]).a"#),
            "é\n"
        );
        assert_eq!(
            eval(r#"return tostring(cjson.decode('null') == cjson.null)"#),
            "true"
        );
        assert!(lua().load("return cjson.decode('[1,')").exec().is_err());
        assert!(lua()
            .load("return cjson.decode('{\"a\" 1}')")
            .exec()
            .is_err());
        assert!(lua().load("return cjson.decode('[1] x')").exec().is_err());
    }

    #[test]
    fn nesting_is_bounded_both_ways() {
        let lua = lua();
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        lua.globals().set("deep", deep).unwrap();
        let e = lua.load("return cjson.decode(deep)").exec().unwrap_err();
        assert!(e.to_string().contains("too many nested"), "{e}");
        let e = lua
            .load("local a = {} a[1] = a return cjson.encode(a)")
            .exec()
            .unwrap_err();
        assert!(e.to_string().contains("excessive nesting"), "{e}");
    }
}
