//! Values between Lua and replies, by the tables of Redis's scripting documentation.
//!
//! A command's reply becomes a Lua value in the protocol the script chose with
//! `redis.setresp` (2 by default): RESP2 gives integers as numbers, bulk strings as
//! strings, nulls as `false`, statuses as `{ok=...}`, errors as `{err=...}`, maps as flat
//! arrays and doubles as strings; RESP3 adds `{map=...}`, `{set=...}`, `{double=...}`,
//! `{big_number=...}`, `{verbatim_string=...}`, booleans and `nil`. A script's return
//! value goes the other way: strings, numbers (truncated to integers), tables by their
//! `err`, `ok`, `double`, `big_number`, `verbatim_string`, `map` and `set` fields or else
//! as arrays up to their first nil, booleans as 1 / null (RESP2) or booleans (RESP3).
//! Tables are read raw (no metamethods), and nesting past [`MAX_NESTING`] ends in
//! Redis's "reached lua stack limit" error, so a table that holds itself is a reply, not
//! a stack overflow.

use super::error_text;
use crate::protocol::{fmt_double, Reply};
use bytes::Bytes;
use mlua::{Lua, Result, Table, Value};

/// Deepest reply a script's return value becomes.
pub const MAX_NESTING: usize = 1000;

/// A command's reply as the script sees it with protocol `resp`.
pub fn from_reply(lua: &Lua, r: Reply, resp: u8) -> Result<Value> {
    let resp3 = resp >= 3;
    let table1 = |k: &str, v: Value| -> Result<Value> {
        let t = lua.create_table_with_capacity(0, 1)?;
        t.raw_set(k, v)?;
        Ok(Value::Table(t))
    };
    let string = |b: &[u8]| -> Result<Value> { Ok(Value::String(lua.create_string(b)?)) };
    Ok(match r {
        Reply::Simple(s) => table1("ok", string(s.as_bytes())?)?,
        Reply::Status(s) => table1("ok", string(s.as_bytes())?)?,
        Reply::Error(e) => table1("err", string(error_text(&format!("-{e}")).as_bytes())?)?,
        Reply::Int(i) => Value::Number(i as f64),
        Reply::Bulk(b) => string(&b)?,
        Reply::Nil | Reply::NilArray if resp3 => Value::Nil,
        Reply::Nil | Reply::NilArray => Value::Boolean(false),
        Reply::Bool(b) if resp3 => Value::Boolean(b),
        Reply::Bool(b) => Value::Number(b as i64 as f64),
        Reply::Double(d) if resp3 => table1("double", Value::Number(d))?,
        Reply::Double(d) => string(fmt_double(d).as_bytes())?,
        Reply::BigNumber(n) if resp3 => table1("big_number", string(n.as_bytes())?)?,
        Reply::BigNumber(n) => string(n.as_bytes())?,
        Reply::Text(t) if resp3 => {
            let v = lua.create_table_with_capacity(0, 2)?;
            v.raw_set("format", "txt")?;
            v.raw_set("string", lua.create_string(t.as_bytes())?)?;
            table1("verbatim_string", Value::Table(v))?
        }
        Reply::Text(t) => string(t.as_bytes())?,
        // Pub/sub commands are `noscript`: a push or several replies never reach a script,
        // but read as an array if one did.
        Reply::Array(items) | Reply::Push(items) | Reply::Many(items) => array(lua, items, resp)?,
        Reply::Set(items) if resp3 => {
            let s = lua.create_table_with_capacity(0, items.len())?;
            for i in items {
                s.raw_set(from_reply(lua, i, resp)?, true)?;
            }
            table1("set", Value::Table(s))?
        }
        Reply::Set(items) => array(lua, items, resp)?,
        Reply::Map(pairs) if resp3 => {
            let m = lua.create_table_with_capacity(0, pairs.len())?;
            for (k, v) in pairs {
                m.raw_set(from_reply(lua, k, resp)?, from_reply(lua, v, resp)?)?;
            }
            table1("map", Value::Table(m))?
        }
        Reply::Map(pairs) => {
            let t = lua.create_table_with_capacity(pairs.len() * 2, 0)?;
            let mut i = 0;
            for (k, v) in pairs {
                t.raw_set(i + 1, from_reply(lua, k, resp)?)?;
                t.raw_set(i + 2, from_reply(lua, v, resp)?)?;
                i += 2;
            }
            Value::Table(t)
        }
    })
}

fn array(lua: &Lua, items: Vec<Reply>, resp: u8) -> Result<Value> {
    let t = lua.create_table_with_capacity(items.len(), 0)?;
    for (i, r) in items.into_iter().enumerate() {
        t.raw_set(i + 1, from_reply(lua, r, resp)?)?;
    }
    Ok(Value::Table(t))
}

/// A script's return value as a reply; `resp` is the protocol the script chose (it
/// decides how booleans are sent).
pub fn to_reply(v: &Value, resp: u8) -> Reply {
    convert(v, resp, 0)
}

fn field(t: &Table, k: &str) -> Value {
    t.raw_get(k).unwrap_or(Value::Nil)
}

fn convert(v: &Value, resp: u8, depth: usize) -> Reply {
    if depth > MAX_NESTING {
        return Reply::err("reached lua stack limit");
    }
    match v {
        Value::String(s) => Reply::Bulk(Bytes::copy_from_slice(&s.as_bytes())),
        Value::Boolean(b) if resp >= 3 => Reply::Bool(*b),
        Value::Boolean(true) => Reply::Int(1),
        Value::Boolean(false) => Reply::Nil,
        Value::Integer(i) => Reply::Int(*i),
        Value::Number(n) => Reply::Int(*n as i64),
        Value::Table(t) => table(t, resp, depth),
        _ => Reply::Nil,
    }
}

fn table(t: &Table, resp: u8, depth: usize) -> Reply {
    if let Value::String(e) = field(t, "err") {
        return Reply::Error(e.to_string_lossy());
    }
    if let Value::String(s) = field(t, "ok") {
        return Reply::Status(s.to_string_lossy().replace(['\r', '\n'], " "));
    }
    match field(t, "double") {
        Value::Number(d) => return Reply::Double(d),
        Value::Integer(i) => return Reply::Double(i as f64),
        _ => {}
    }
    if let Value::String(n) = field(t, "big_number") {
        return Reply::BigNumber(n.to_string_lossy().replace(['\r', '\n'], " "));
    }
    if let Value::Table(v) = field(t, "verbatim_string") {
        if let (Value::String(_), Value::String(s)) = (field(&v, "format"), field(&v, "string")) {
            return Reply::Text(s.to_string_lossy());
        }
    }
    if let Value::Table(m) = field(t, "map") {
        let pairs = m
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok())
            .map(|(k, v)| (convert(&k, resp, depth + 1), convert(&v, resp, depth + 1)))
            .collect();
        return Reply::Map(pairs);
    }
    if let Value::Table(s) = field(t, "set") {
        let items = s
            .pairs::<Value, Value>()
            .filter_map(|p| p.ok())
            .map(|(k, _)| convert(&k, resp, depth + 1))
            .collect();
        return Reply::Set(items);
    }
    let mut items = Vec::new();
    for i in 1.. {
        let v: Value = t.raw_get(i).unwrap_or(Value::Nil);
        if v.is_nil() {
            break;
        }
        items.push(convert(&v, resp, depth + 1));
    }
    Reply::Array(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua_reply(src: &str, resp: u8) -> Reply {
        let lua = Lua::new();
        let v: Value = lua.load(src).eval().unwrap();
        to_reply(&v, resp)
    }

    #[test]
    fn lua_to_reply() {
        assert_eq!(lua_reply("return 100.5", 2), Reply::Int(100));
        assert_eq!(lua_reply("return false", 2), Reply::Nil);
        assert_eq!(lua_reply("return true", 3), Reply::Bool(true));
        assert_eq!(
            lua_reply("return {1, 'a', {2}, nil, 5}", 2),
            Reply::Array(vec![
                Reply::Int(1),
                Reply::bulk("a"),
                Reply::Array(vec![Reply::Int(2)])
            ])
        );
        assert_eq!(
            lua_reply("return {ok='fine'}", 2),
            Reply::Status("fine".into())
        );
        assert_eq!(
            lua_reply("return {err='X y'}", 2),
            Reply::Error("X y".into())
        );
        assert_eq!(lua_reply("return {double=1.5}", 3), Reply::Double(1.5));
        assert_eq!(
            lua_reply("return {map={a=1}}", 3),
            Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))])
        );
    }

    #[test]
    fn self_holding_tables_end() {
        let mut r = lua_reply("local a = {} a[1] = a return a", 2);
        let mut depth = 0;
        while let Reply::Array(mut v) = r {
            r = v.pop().unwrap();
            depth += 1;
        }
        assert_eq!(depth, MAX_NESTING + 1);
        assert_eq!(r, Reply::err("reached lua stack limit"));
    }

    #[test]
    fn reply_to_lua() {
        let lua = Lua::new();
        let map = Reply::Map(vec![(Reply::bulk("f"), Reply::bulk("v"))]);
        let v = from_reply(&lua, map.clone(), 2).unwrap();
        lua.globals().set("v", v).unwrap();
        assert_eq!(
            lua.load("return v[1]..v[2]").eval::<String>().unwrap(),
            "fv"
        );
        let v = from_reply(&lua, map, 3).unwrap();
        lua.globals().set("v", v).unwrap();
        assert_eq!(lua.load("return v.map.f").eval::<String>().unwrap(), "v");
        let v = from_reply(&lua, Reply::Nil, 2).unwrap();
        assert_eq!(v, Value::Boolean(false));
        let v = from_reply(&lua, Reply::Error("WRONGTYPE x".into()), 2).unwrap();
        lua.globals().set("v", v).unwrap();
        assert_eq!(
            lua.load("return v.err").eval::<String>().unwrap(),
            "WRONGTYPE x"
        );
    }
}
