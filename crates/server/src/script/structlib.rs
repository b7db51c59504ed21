//! `struct`: Roberto Ierusalimschy's `struct.pack`, `struct.unpack` and `struct.size`, as
//! Redis loads them into every script.
//!
//! Hand-written: no crate provides this library for mlua. The format language is small:
//! `<` `>` `=` byte order, `!n` alignment, `x` padding, `b B h H l L T` and `i[n] I[n]`
//! integers (`n` up to 32 bytes), `f` `d` floats, `s` zero-terminated and `c[n]`
//! fixed-size strings, spaces ignored. Sizes are those of a 64-bit C build (`long` and
//! `size_t` are 8 bytes, `int` 4), as in Redis on the machines it runs on. Every size is
//! checked against the data or the arguments before anything is copied, so a format
//! cannot make the library read past a string or build more than its arguments hold.

use mlua::{Lua, MultiValue, Result, String as LuaString, Table, Value};

const MAX_INT_SIZE: usize = 32;
/// `!` without a number: the alignment of a double on x86-64.
const MAX_ALIGN: usize = 8;

fn err<T>(msg: impl Into<String>) -> Result<T> {
    Err(mlua::Error::RuntimeError(msg.into()))
}

struct Format<'a> {
    fmt: &'a [u8],
    at: usize,
    little: bool,
    align: usize,
}

impl Format<'_> {
    fn new(fmt: &[u8]) -> Format<'_> {
        Format {
            fmt,
            at: 0,
            little: cfg!(target_endian = "little"),
            align: 1,
        }
    }

    fn number(&mut self, default: usize) -> Result<usize> {
        if !self.fmt.get(self.at).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: usize = 0;
        while let Some(d) = self.fmt.get(self.at).filter(|c| c.is_ascii_digit()) {
            a = a
                .checked_mul(10)
                .and_then(|a| a.checked_add((d - b'0') as usize))
                .filter(|&a| a <= i32::MAX as usize)
                .map_or_else(|| err("integral size overflow"), Ok)?;
            self.at += 1;
        }
        Ok(a)
    }

    /// The next option and its size; `None` at the end. Order and alignment options are
    /// applied here and come back with size 0.
    fn next(&mut self) -> Result<Option<(u8, usize)>> {
        let Some(&opt) = self.fmt.get(self.at) else {
            return Ok(None);
        };
        self.at += 1;
        let size = match opt {
            b'b' | b'B' | b'x' => 1,
            b'h' | b'H' => 2,
            b'l' | b'L' | b'T' | b'd' => 8,
            b'f' => 4,
            b'c' => self.number(1)?,
            b'i' | b'I' => {
                let n = self.number(4)?;
                if n > MAX_INT_SIZE {
                    return err(format!(
                        "integral size {n} is larger than limit of {MAX_INT_SIZE}"
                    ));
                }
                n
            }
            b's' => 0,
            b' ' => 0,
            b'>' => {
                self.little = false;
                0
            }
            b'<' => {
                self.little = true;
                0
            }
            b'=' => {
                self.little = cfg!(target_endian = "little");
                0
            }
            b'!' => {
                let a = self.number(MAX_ALIGN)?;
                if !a.is_power_of_two() {
                    return err(format!("alignment {a} is not a power of 2"));
                }
                self.align = a;
                0
            }
            _ => {
                return err(format!(
                    "bad argument #1 to 'struct' (invalid format option '{}')",
                    opt as char
                ))
            }
        };
        Ok(Some((opt, size)))
    }

    /// Padding that aligns an item of `size` at `len`.
    fn padding(&self, len: usize, opt: u8, size: usize) -> usize {
        if size == 0 || opt == b'c' {
            return 0;
        }
        let size = size.min(self.align);
        (size - (len & (size - 1))) & (size - 1)
    }
}

fn is_int(opt: u8) -> bool {
    matches!(
        opt,
        b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I'
    )
}

fn arg(args: &[Value], i: usize) -> Result<&Value> {
    args.get(i).map_or_else(
        || {
            err(format!(
                "bad argument #{} to 'pack' (number expected, got no value)",
                i + 2
            ))
        },
        Ok,
    )
}

fn number(v: &Value, i: usize) -> Result<f64> {
    match v {
        Value::Integer(n) => Ok(*n as f64),
        Value::Number(n) => Ok(*n),
        Value::String(s) => s
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .map_or_else(
                || {
                    err(format!(
                        "bad argument #{} to 'pack' (number expected, got string)",
                        i + 2
                    ))
                },
                Ok,
            ),
        other => err(format!(
            "bad argument #{} to 'pack' (number expected, got {})",
            i + 2,
            other.type_name()
        )),
    }
}

fn pack(lua: &Lua, (fmt, args): (LuaString, MultiValue)) -> Result<LuaString> {
    let fmt = fmt.as_bytes();
    let args: Vec<Value> = args.into_iter().collect();
    let mut f = Format::new(&fmt);
    let mut out: Vec<u8> = Vec::new();
    let mut i = 0;
    while let Some((opt, size)) = f.next()? {
        out.resize(out.len() + f.padding(out.len(), opt, size), 0);
        match opt {
            o if is_int(o) => {
                let n = number(arg(&args, i)?, i)?;
                i += 1;
                let mut v: u64 = if n < 0.0 { n as i64 as u64 } else { n as u64 };
                let mut bytes = vec![0u8; size];
                for b in bytes.iter_mut() {
                    *b = v as u8;
                    v = v.checked_shr(8).unwrap_or(0);
                }
                if !f.little {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' | b'd' => {
                let n = number(arg(&args, i)?, i)?;
                i += 1;
                let bytes: Vec<u8> = match (opt, f.little) {
                    (b'f', true) => (n as f32).to_le_bytes().to_vec(),
                    (b'f', false) => (n as f32).to_be_bytes().to_vec(),
                    (_, true) => n.to_le_bytes().to_vec(),
                    (_, false) => n.to_be_bytes().to_vec(),
                };
                out.extend_from_slice(&bytes);
            }
            b'c' | b's' => {
                let s = match arg(&args, i)? {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(_) | Value::Number(_) => {
                        number(&args[i], i)?.to_string().into_bytes()
                    }
                    other => {
                        return err(format!(
                            "bad argument #{} to 'pack' (string expected, got {})",
                            i + 2,
                            other.type_name()
                        ))
                    }
                };
                i += 1;
                let size = if size == 0 { s.len() } else { size };
                if s.len() < size {
                    return err(format!(
                        "bad argument #{} to 'pack' (string too short)",
                        i + 1
                    ));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
            }
            _ => {}
        }
    }
    lua.create_string(&out)
}

fn unpack(lua: &Lua, (fmt, data, init): (LuaString, LuaString, Option<i64>)) -> Result<MultiValue> {
    let fmt = fmt.as_bytes();
    let data = data.as_bytes();
    let ld = data.len();
    let init = init.unwrap_or(1);
    if init <= 0 {
        return err("bad argument #3 to 'unpack' (offset must be 1 or greater)");
    }
    let mut pos = (init - 1) as usize;
    let mut f = Format::new(&fmt);
    let mut out: Vec<Value> = Vec::new();
    let short = || err("bad argument #2 to 'unpack' (data string too short)");
    while let Some((opt, mut size)) = f.next()? {
        pos = pos.saturating_add(f.padding(pos, opt, size));
        if size > ld || pos > ld - size {
            return short();
        }
        match opt {
            o if is_int(o) => {
                let bytes = &data[pos..pos + size];
                let mut l: u64 = 0;
                let mut push = |b: u8| l = (l << 8) | b as u64;
                if f.little {
                    bytes.iter().rev().for_each(|&b| push(b));
                } else {
                    bytes.iter().for_each(|&b| push(b));
                }
                let v = if o.is_ascii_lowercase() && size > 0 && size < 8 {
                    let shift = 64 - size * 8;
                    (((l << shift) as i64) >> shift) as f64
                } else if o.is_ascii_lowercase() {
                    l as i64 as f64
                } else {
                    l as f64
                };
                out.push(Value::Number(v));
            }
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                let v = if f.little {
                    f32::from_le_bytes(b)
                } else {
                    f32::from_be_bytes(b)
                };
                out.push(Value::Number(v as f64));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                let v = if f.little {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                };
                out.push(Value::Number(v));
            }
            b'c' => {
                if size == 0 {
                    size = match out.pop() {
                        Some(Value::Number(n)) if n >= 0.0 => n as usize,
                        _ => return err("format 'c0' needs a previous size"),
                    };
                    if size > ld || pos > ld - size {
                        return short();
                    }
                }
                out.push(Value::String(lua.create_string(&data[pos..pos + size])?));
            }
            b's' => {
                let Some(end) = data[pos..].iter().position(|&b| b == 0) else {
                    return err("unfinished string in data");
                };
                out.push(Value::String(lua.create_string(&data[pos..pos + end])?));
                size = end + 1;
            }
            _ => {}
        }
        pos += size;
    }
    out.push(Value::Number((pos + 1) as f64));
    Ok(MultiValue::from_vec(out))
}

fn size(_: &Lua, fmt: LuaString) -> Result<f64> {
    let fmt = fmt.as_bytes();
    let mut f = Format::new(&fmt);
    let mut pos: usize = 0;
    while let Some((opt, size)) = f.next()? {
        pos = pos.saturating_add(f.padding(pos, opt, size));
        if opt == b's' {
            return err("bad argument #1 to 'size' (option 's' has no fixed size)");
        }
        if opt == b'c' && size == 0 {
            return err("bad argument #1 to 'size' (option 'c0' has no fixed size)");
        }
        pos = pos.saturating_add(size);
    }
    Ok(pos as f64)
}

/// The `struct` table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lua.create_function(pack)?)?;
    t.set("unpack", lua.create_function(unpack)?)?;
    t.set("size", lua.create_function(size)?)?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(src: &str) -> String {
        let lua = Lua::new();
        lua.globals().set("struct", open(&lua).unwrap()).unwrap();
        lua.load(src).eval::<String>().unwrap()
    }

    #[test]
    fn round_trips() {
        assert_eq!(
            eval(
                "local s = struct.pack('>I2', 258) return string.byte(s,1)..','..string.byte(s,2)"
            ),
            "1,2"
        );
        assert_eq!(
            eval("local a, b, c, n = struct.unpack('<i4 d s', struct.pack('<i4 d s', -7, 1.5, 'hi')) return a..' '..b..' '..c..' '..n"),
            "-7 1.5 hi 16"
        );
        assert_eq!(eval("return tostring(struct.size('!4 b i4'))"), "8");
        assert_eq!(
            eval("local s = struct.pack('B c0', 3, 'abc') local v = struct.unpack('B c0', s) return v"),
            "abc"
        );
        assert_eq!(
            eval("return tostring(select(1, struct.unpack('>h', '\\255\\254')))"),
            "-2"
        );
    }

    #[test]
    fn short_data_is_an_error() {
        let lua = Lua::new();
        lua.globals().set("struct", open(&lua).unwrap()).unwrap();
        assert!(lua
            .load("return struct.unpack('c100', 'ab')")
            .exec()
            .is_err());
        assert!(lua
            .load("return struct.unpack('i40', 'ab')")
            .exec()
            .is_err());
        assert!(lua.load("return struct.pack('c5', 'ab')").exec().is_err());
    }
}
