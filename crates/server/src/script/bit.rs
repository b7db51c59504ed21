//! `bit`: LuaBitOp's 32-bit operations, as Redis loads them into every script.
//!
//! Hand-written: no crate provides LuaBitOp for mlua, and it is a page of arithmetic.
//! Numbers are Lua 5.1 doubles: an argument is rounded to the nearest integer and taken
//! modulo 2^32 (LuaBitOp's `barg`), and every result is a signed 32-bit number.

use mlua::{Lua, Result, Table, Variadic};

/// An argument as LuaBitOp reads it: rounded (ties to even, as the FPU does), modulo 2^32.
fn barg(n: f64) -> u32 {
    // Adding 2^52 + 2^51 rounds to an integer in the low mantissa bits, exactly LuaBitOp's
    // trick; the low 32 bits of the representation are the argument modulo 2^32.
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

fn out(b: u32) -> f64 {
    b as i32 as f64
}

fn fold(name: &'static str, f: fn(u32, u32) -> u32) -> impl Fn(&Lua, Variadic<f64>) -> Result<f64> {
    move |_, args: Variadic<f64>| {
        let mut it = args.iter();
        let first = it.next().ok_or_else(|| {
            mlua::Error::RuntimeError(format!(
                "bad argument #1 to '{name}' (number expected, got no value)"
            ))
        })?;
        Ok(out(it.fold(barg(*first), |acc, &n| f(acc, barg(n)))))
    }
}

/// The `bit` table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set("tobit", lua.create_function(|_, n: f64| Ok(out(barg(n))))?)?;
    t.set("bnot", lua.create_function(|_, n: f64| Ok(out(!barg(n))))?)?;
    t.set(
        "bswap",
        lua.create_function(|_, n: f64| Ok(out(barg(n).swap_bytes())))?,
    )?;
    t.set("band", lua.create_function(fold("band", |a, b| a & b))?)?;
    t.set("bor", lua.create_function(fold("bor", |a, b| a | b))?)?;
    t.set("bxor", lua.create_function(fold("bxor", |a, b| a ^ b))?)?;
    let shift = |f: fn(u32, u32) -> u32| {
        move |_: &Lua, (x, n): (f64, f64)| Ok(out(f(barg(x), barg(n) & 31)))
    };
    t.set("lshift", lua.create_function(shift(|x, n| x << n))?)?;
    t.set("rshift", lua.create_function(shift(|x, n| x >> n))?)?;
    t.set(
        "arshift",
        lua.create_function(shift(|x, n| ((x as i32) >> n) as u32))?,
    )?;
    t.set("rol", lua.create_function(shift(|x, n| x.rotate_left(n)))?)?;
    t.set("ror", lua.create_function(shift(|x, n| x.rotate_right(n)))?)?;
    t.set(
        "tohex",
        lua.create_function(|_, (x, n): (f64, Option<f64>)| {
            let mut b = barg(x);
            let mut n = n.map_or(8, |n| barg(n) as i32);
            let digits: &[u8] = if n < 0 {
                n = n.wrapping_neg();
                b"0123456789ABCDEF"
            } else {
                b"0123456789abcdef"
            };
            let n = n.clamp(0, 8) as usize;
            let mut buf = [0u8; 8];
            for i in (0..n).rev() {
                buf[i] = digits[(b & 15) as usize];
                b >>= 4;
            }
            Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
        })?,
    )?;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(src: &str) -> String {
        let lua = Lua::new();
        lua.globals().set("bit", open(&lua).unwrap()).unwrap();
        lua.load(src).eval::<String>().unwrap()
    }

    #[test]
    fn operations_match_luabitop() {
        assert_eq!(eval("return tostring(bit.tobit(0xffffffff))"), "-1");
        assert_eq!(eval("return tostring(bit.tobit(2^32 + 5))"), "5");
        assert_eq!(
            eval("return tostring(bit.bor(1,2,4,8,16,32,64,128))"),
            "255"
        );
        assert_eq!(eval("return tostring(bit.bxor(1,2))"), "3");
        assert_eq!(eval("return tostring(bit.lshift(1, 31))"), "-2147483648");
        assert_eq!(eval("return tostring(bit.rshift(-1, 28))"), "15");
        assert_eq!(eval("return tostring(bit.arshift(-256, 4))"), "-16");
        assert_eq!(eval("return tostring(bit.rol(0x12345678, 8))"), "878082066");
        assert_eq!(eval("return bit.tohex(255)"), "000000ff");
        assert_eq!(eval("return bit.tohex(-1, -4)"), "FFFF");
        assert_eq!(eval("return tostring(bit.bswap(0x12345678))"), "2018915346");
        assert_eq!(eval("return tostring(bit.bnot(0))"), "-1");
    }
}
