//! `cmsgpack`: Redis's lua-cmsgpack (`pack`, `unpack`, `unpack_one`, `unpack_limit`), the
//! MessagePack encoding written by [`rmp`].
//!
//! Hand-written around `rmp`: no crate gives lua-cmsgpack's mapping of Lua values for mlua
//! (a table is an array when its keys are exactly 1..n, integral numbers take the
//! smallest integer form, a double that a float holds exactly is a float, tables nested
//! deeper than 16 are packed as nil so that circular tables end). Unpacking checks every
//! length against the bytes left before it allocates and nests at most [`MAX_DEPTH`]
//! deep, so a hostile payload is an error.

use mlua::{Lua, MultiValue, Result, String as LuaString, Table, Value};
use rmp::Marker;

/// lua-cmsgpack's `LUACMSGPACK_MAX_NESTING`: deeper tables are packed as nil.
const PACK_NESTING: usize = 16;
/// Deepest nesting an unpacked payload may have.
pub const MAX_DEPTH: usize = 1000;

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(mlua::Error::RuntimeError(msg.into()))
}

fn is_array(t: &Table) -> Result<bool> {
    let (mut count, mut max) = (0f64, 0f64);
    for pair in t.clone().pairs::<Value, Value>() {
        let n = match pair?.0 {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(false),
        };
        if n <= 0.0 || n.fract() != 0.0 || n > i32::MAX as f64 {
            return Ok(false);
        }
        max = f64::max(max, n);
        count += 1.0;
    }
    Ok(max == count)
}

fn number(out: &mut Vec<u8>, n: f64) {
    let w = |r: std::result::Result<_, _>| {
        r.expect("writing to a Vec cannot fail");
    };
    if n.is_finite() && n == (n as i64) as f64 {
        let i = n as i64;
        if i >= 0 {
            w(rmp::encode::write_uint(out, i as u64).map(drop));
        } else {
            w(rmp::encode::write_sint(out, i).map(drop));
        }
    } else if (n as f32) as f64 == n || n.is_nan() {
        w(rmp::encode::write_f32(out, n as f32));
    } else {
        w(rmp::encode::write_f64(out, n));
    }
}

fn pack_value(out: &mut Vec<u8>, v: Value, level: usize) -> Result<()> {
    let ok = |r: std::result::Result<_, rmp::encode::ValueWriteError>| {
        r.map(drop)
            .map_err(|e| mlua::Error::RuntimeError(e.to_string()))
    };
    match v {
        Value::String(s) => {
            let b = s.as_bytes();
            ok(rmp::encode::write_str_len(out, b.len() as u32))?;
            out.extend_from_slice(&b);
        }
        Value::Boolean(b) => out.push(if b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => number(out, i as f64),
        Value::Number(n) => number(out, n),
        Value::Table(t) if level < PACK_NESTING => {
            if is_array(&t)? {
                let len = t.raw_len();
                ok(rmp::encode::write_array_len(out, len as u32))?;
                for i in 1..=len {
                    pack_value(out, t.raw_get(i)?, level + 1)?;
                }
            } else {
                let n = t.clone().pairs::<Value, Value>().count();
                ok(rmp::encode::write_map_len(out, n as u32))?;
                for pair in t.pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    pack_value(out, k, level + 1)?;
                    pack_value(out, v, level + 1)?;
                }
            }
        }
        _ => out.push(0xc0),
    }
    Ok(())
}

fn pack(lua: &Lua, args: MultiValue) -> Result<LuaString> {
    if args.is_empty() {
        return err("MessagePack pack needs input.");
    }
    let mut out = Vec::new();
    for v in args {
        pack_value(&mut out, v, 0)?;
    }
    lua.create_string(&out)
}

struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

fn missing<T>() -> Result<T> {
    err("Missing bytes in input.")
}

fn bad<T>() -> Result<T> {
    err("Bad data format in input.")
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        if self.s.len() - self.at < n {
            return missing();
        }
        let b = &self.s[self.at..self.at + n];
        self.at += n;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &b| (a << 8) | b as u64))
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> Result<Value> {
        let m = Marker::from_u8(self.take(1)?[0]);
        let num = |n: f64| Ok(Value::Number(n));
        let (len, kind) = match m {
            Marker::Null => return Ok(Value::Nil),
            Marker::True => return Ok(Value::Boolean(true)),
            Marker::False => return Ok(Value::Boolean(false)),
            Marker::FixPos(n) => return num(n as f64),
            Marker::FixNeg(n) => return num(n as f64),
            Marker::U8 => return num(self.uint(1)? as f64),
            Marker::U16 => return num(self.uint(2)? as f64),
            Marker::U32 => return num(self.uint(4)? as f64),
            Marker::U64 => return num(self.uint(8)? as f64),
            Marker::I8 => return num(self.uint(1)? as u8 as i8 as f64),
            Marker::I16 => return num(self.uint(2)? as u16 as i16 as f64),
            Marker::I32 => return num(self.uint(4)? as u32 as i32 as f64),
            Marker::I64 => return num(self.uint(8)? as i64 as f64),
            Marker::F32 => return num(f32::from_bits(self.uint(4)? as u32) as f64),
            Marker::F64 => return num(f64::from_bits(self.uint(8)?)),
            Marker::FixStr(n) => (n as u64, 's'),
            Marker::Str8 | Marker::Bin8 => (self.uint(1)?, 's'),
            Marker::Str16 | Marker::Bin16 => (self.uint(2)?, 's'),
            Marker::Str32 | Marker::Bin32 => (self.uint(4)?, 's'),
            Marker::FixArray(n) => (n as u64, 'a'),
            Marker::Array16 => (self.uint(2)?, 'a'),
            Marker::Array32 => (self.uint(4)?, 'a'),
            Marker::FixMap(n) => (n as u64, 'm'),
            Marker::Map16 => (self.uint(2)?, 'm'),
            Marker::Map32 => (self.uint(4)?, 'm'),
            _ => return bad(),
        };
        let left = (self.s.len() - self.at) as u64;
        if kind == 's' {
            let b = self.take(len as usize)?;
            return Ok(Value::String(lua.create_string(b)?));
        }
        if depth >= MAX_DEPTH {
            return err(format!(
                "MessagePack payload nested deeper than {MAX_DEPTH} levels"
            ));
        }
        // Every element takes at least one byte: a length past what is left is refused
        // before anything is allocated for it.
        let per = if kind == 'm' { 2 } else { 1 };
        if len.saturating_mul(per) > left {
            return missing();
        }
        let t = lua.create_table_with_capacity(
            if kind == 'a' { len as usize } else { 0 },
            if kind == 'm' { len as usize } else { 0 },
        )?;
        for i in 1..=len {
            if kind == 'a' {
                let v = self.value(lua, depth + 1)?;
                t.raw_set(i, v)?;
            } else {
                let k = self.value(lua, depth + 1)?;
                let v = self.value(lua, depth + 1)?;
                if k.is_nil() {
                    return bad();
                }
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

/// `unpack_full` of lua-cmsgpack: up to `limit` values from `offset` (0 and 0: all of
/// them, without the offset in front).
fn unpack_full(lua: &Lua, s: LuaString, limit: i64, offset: i64) -> Result<MultiValue> {
    let bytes = s.as_bytes();
    let len = bytes.len() as i64;
    if offset < 0 || limit < 0 {
        return err(format!(
            "Invalid request to unpack with offset of {offset} and limit of {len}."
        ));
    }
    if offset > len {
        return err(format!(
            "Start offset {offset} greater than input length {len}."
        ));
    }
    let all = limit == 0 && offset == 0;
    let limit = if all { i64::MAX } else { limit };
    let mut c = Cursor {
        s: &bytes,
        at: offset as usize,
    };
    let mut out = Vec::new();
    let mut n = 0;
    while c.at < bytes.len() && n < limit {
        out.push(c.value(lua, 0)?);
        n += 1;
    }
    if !all {
        let next = if c.at == bytes.len() { -1 } else { c.at as i64 };
        out.insert(0, Value::Number(next as f64));
    }
    Ok(MultiValue::from_vec(out))
}

/// The `cmsgpack` table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lua.create_function(pack)?)?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: LuaString| unpack_full(lua, s, 0, 0))?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, off): (LuaString, Option<i64>)| {
            unpack_full(lua, s, 1, off.unwrap_or(0))
        })?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|lua, (s, limit, off): (LuaString, i64, Option<i64>)| {
            unpack_full(lua, s, limit, off.unwrap_or(0))
        })?,
    )?;
    t.set("_NAME", "cmsgpack")?;
    t.set("_VERSION", "lua-cmsgpack 0.4.0")?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", open(&lua).unwrap()).unwrap();
        lua
    }

    const HEX: &str = "local function hex(s) local h = '' for i = 1, #s do h = h .. string.format('%02x', string.byte(s, i)) end return h end ";

    fn eval(src: &str) -> String {
        lua().load(format!("{HEX}{src}")).eval::<String>().unwrap()
    }

    #[test]
    fn packs_as_lua_cmsgpack() {
        assert_eq!(eval("return hex(cmsgpack.pack(0.1))"), "cb3fb999999999999a");
        assert_eq!(
            eval("return hex(cmsgpack.pack(-1099511627776))"),
            "d3ffffff0000000000"
        );
        assert_eq!(
            eval("return hex(cmsgpack.pack({1, 'a', true}))"),
            "9301a161c3"
        );
        assert_eq!(eval("return hex(cmsgpack.pack(200, -3))"), "ccc8fd");
        // Circular tables end at the nesting limit with nil.
        let h = eval("local a = {} a[1] = a return hex(cmsgpack.pack(a))");
        assert_eq!(h, format!("{}c0", "91".repeat(16)));
    }

    #[test]
    fn unpacks_streams() {
        assert_eq!(
            eval("local s = cmsgpack.pack('x', 'yy') local o, a = cmsgpack.unpack_one(s, 0) local o2, b = cmsgpack.unpack_one(s, o) return a..b..o2"),
            "xyy-1"
        );
        assert_eq!(
            eval("local t = cmsgpack.unpack(cmsgpack.pack({a=1, b={2,3}})) return t.a..t.b[2]"),
            "13"
        );
    }

    #[test]
    fn hostile_payloads_are_errors() {
        let lua = lua();
        for payload in [
            vec![0xdd, 0xff, 0xff, 0xff, 0xff],
            vec![0xdb, 0xff, 0xff, 0xff, 0xff, b'a'],
            vec![0x91; 100_000],
            vec![0xc1],
        ] {
            lua.globals()
                .set("p", lua.create_string(&payload).unwrap())
                .unwrap();
            assert!(lua.load("return cmsgpack.unpack(p)").exec().is_err());
        }
    }
}
