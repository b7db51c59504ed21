//! Redis 7's function libraries: `#!lua name=<lib>` code whose run registers functions
//! (`redis.register_function`), kept by library and by function name (both
//! case-insensitive), and `FUNCTION DUMP`'s payload.
//!
//! The payload is Redis 7.0's (each library's code behind RDB opcode 245 as an RDB
//! string, then RDB version 10 and the CRC-64 of Redis), so functions move between Redis
//! and halflife with `FUNCTION DUMP`/`RESTORE`. Reading checks the trailer first and every
//! length against what is left, LZF-compressed strings included (Redis compresses those
//! longer than 20 bytes), before anything is allocated.
//!
//! Keeping the libraries in the database (they survive a restart and replicate) is the
//! server's part: it stores each library's code and asks this registry to load it.

use super::eval::split_args;
use super::sandbox::{valid_name, Interp, Kind, Outcome, Registered, RunOptions, BAD_NAME};
use super::{Activity, Flags, ScriptHost};
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A registered function.
pub struct Func {
    pub name: String,
    pub description: Option<String>,
    pub flags: Flags,
    func: mlua::Function,
}

/// A loaded library.
pub struct Library {
    pub name: String,
    /// The code as loaded, shebang included (`FUNCTION LIST WITHCODE`, `DUMP`).
    pub code: Bytes,
    pub functions: Vec<Func>,
}

/// What `FUNCTION RESTORE` does with the libraries there are.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RestorePolicy {
    Flush,
    Append,
    Replace,
}

/// What `FUNCTION RESTORE` did: the libraries it added (name and code) and the names of
/// those it removed.
pub type Restored = (Vec<(String, Bytes)>, Vec<String>);

/// The function interpreter and its libraries.
pub struct Libraries {
    interp: Interp,
    /// By lower-case name.
    libraries: BTreeMap<String, Library>,
    /// Lower-case function name -> lower-case library name.
    functions: HashMap<String, String>,
}

/// A library's first line: its name, and the code after the line (from its newline on,
/// so that line numbers stay).
fn metadata(code: &[u8]) -> Result<(String, &[u8]), String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let parts = split_args(&String::from_utf8_lossy(&code[..end]));
    let Some(engine) = parts.first() else {
        return Err("Invalid library metadata".into());
    };
    let engine = &engine[2..];
    let mut name = None;
    for p in &parts[1..] {
        if p.len() >= 5 && p[..5].eq_ignore_ascii_case("name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(p[5..].to_string());
            continue;
        }
        return Err(format!("Invalid metadata value given: {p}"));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    if !valid_name(name.as_bytes()) {
        return Err(BAD_NAME.into());
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("Engine '{engine}' not found"));
    }
    Ok((name, &code[end..]))
}

impl Libraries {
    pub fn new(activity: Arc<Activity>, memory: usize) -> Libraries {
        Libraries {
            interp: Interp::new(Kind::Functions, activity, memory)
                .expect("a new interpreter starts"),
            libraries: BTreeMap::new(),
            functions: HashMap::new(),
        }
    }

    pub fn set_memory_limit(&mut self, bytes: usize) {
        self.interp.set_memory_limit(bytes);
    }

    pub fn used_memory(&self) -> usize {
        self.interp.used_memory()
    }

    /// Loads `code` into a library, checked against nothing but itself.
    fn build(&self, code: &[u8]) -> Result<Library, String> {
        let (name, body) = metadata(code)?;
        let registered = self.interp.load_library(body)?;
        if registered.is_empty() {
            return Err("No functions registered".into());
        }
        Ok(Library {
            name,
            code: Bytes::copy_from_slice(code),
            functions: registered
                .into_iter()
                .map(
                    |Registered {
                         name,
                         func,
                         description,
                         flags,
                     }| Func {
                        name,
                        description,
                        flags,
                        func,
                    },
                )
                .collect(),
        })
    }

    /// The name of the first function of `lib` that another library (not in `except`)
    /// has.
    fn collision(&self, lib: &Library, except: &[String]) -> Option<String> {
        lib.functions
            .iter()
            .find(|f| {
                self.functions
                    .get(&f.name.to_ascii_lowercase())
                    .is_some_and(|owner| !except.contains(owner))
            })
            .map(|f| f.name.clone())
    }

    fn link(&mut self, lib: Library) {
        let key = lib.name.to_ascii_lowercase();
        for f in &lib.functions {
            self.functions
                .insert(f.name.to_ascii_lowercase(), key.clone());
        }
        self.libraries.insert(key, lib);
    }

    fn unlink(&mut self, name: &str) -> Option<Library> {
        let lib = self.libraries.remove(&name.to_ascii_lowercase())?;
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        Some(lib)
    }

    /// `FUNCTION LOAD [REPLACE] code`: the library's name. On an error nothing changes.
    pub fn load(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let (name, _) = metadata(code)?;
        let key = name.to_ascii_lowercase();
        if self.libraries.contains_key(&key) && !replace {
            return Err(format!("Library '{name}' already exists"));
        }
        let lib = self.build(code)?;
        if let Some(f) = self.collision(&lib, &[key]) {
            return Err(format!("Function {f} already exists"));
        }
        self.unlink(&name);
        self.link(lib);
        Ok(name)
    }

    /// `FUNCTION DELETE`.
    pub fn delete(&mut self, name: &str) -> Result<(), String> {
        self.unlink(name)
            .map(drop)
            .ok_or_else(|| "Library not found".to_string())
    }

    /// `FUNCTION FLUSH`: no libraries (their code and closures are garbage).
    pub fn flush(&mut self) {
        self.libraries.clear();
        self.functions.clear();
    }

    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libraries.values()
    }

    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// The function `name` (any case).
    pub fn function(&self, name: &str) -> Option<&Func> {
        let name = name.to_ascii_lowercase();
        let lib = self.libraries.get(self.functions.get(&name)?)?;
        lib.functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(&name))
    }

    /// Runs function `f` (from [`Libraries::function`]).
    pub fn run(
        &self,
        host: &mut dyn ScriptHost,
        f: &Func,
        keys: &[Bytes],
        argv: &[Bytes],
        read_only: bool,
    ) -> Outcome {
        let opts = RunOptions {
            name: &f.name,
            read_only,
        };
        self.interp.run(host, &f.func, keys, argv, &opts)
    }

    /// `FUNCTION DUMP`: every library, in Redis 7.0's payload.
    pub fn dump(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for lib in self.libraries.values() {
            out.push(payload::OPCODE_FUNCTION2);
            payload::push_string(&mut out, &lib.code);
        }
        payload::seal(&mut out);
        out
    }

    /// `FUNCTION RESTORE payload [policy]`: the libraries it held (name and code, to be
    /// stored), and the names of those it removed. On an error nothing changes.
    pub fn restore(&mut self, data: &[u8], policy: RestorePolicy) -> Result<Restored, String> {
        let codes = payload::parse(data)?;
        let mut new: BTreeMap<String, Library> = BTreeMap::new();
        let mut seen: HashMap<String, String> = HashMap::new();
        for code in &codes {
            let lib = self.build(code)?;
            let key = lib.name.to_ascii_lowercase();
            if new.contains_key(&key) {
                return Err(format!("Library {} already exists", lib.name));
            }
            for f in &lib.functions {
                if seen
                    .insert(f.name.to_ascii_lowercase(), key.clone())
                    .is_some()
                {
                    return Err(format!("Function {} already exists", f.name));
                }
            }
            new.insert(key, lib);
        }
        let removed: Vec<String> = match policy {
            RestorePolicy::Flush => self.libraries.values().map(|l| l.name.clone()).collect(),
            RestorePolicy::Append => {
                if let Some(l) = new
                    .values()
                    .find(|l| self.libraries.contains_key(&l.name.to_ascii_lowercase()))
                {
                    return Err(format!("Library {} already exists", l.name));
                }
                Vec::new()
            }
            RestorePolicy::Replace => new
                .keys()
                .filter_map(|k| self.libraries.get(k).map(|l| l.name.clone()))
                .collect(),
        };
        let except: Vec<String> = removed.iter().map(|n| n.to_ascii_lowercase()).collect();
        for lib in new.values() {
            if let Some(f) = self.collision(lib, &except) {
                return Err(format!("Function {f} already exists"));
            }
        }
        for n in &removed {
            self.unlink(n);
        }
        let stored = new
            .values()
            .map(|l| (l.name.clone(), l.code.clone()))
            .collect();
        for lib in new.into_values() {
            self.link(lib);
        }
        Ok((stored, removed))
    }
}

/// `FUNCTION DUMP`'s payload, Redis 7.0's format.
pub mod payload {
    /// `RDB_OPCODE_FUNCTION2`: a library's code follows.
    pub const OPCODE_FUNCTION2: u8 = 245;
    /// Redis 7.0's RDB version, the newest a payload may carry.
    pub const RDB_VERSION: u16 = 10;

    fn crc64(b: &[u8]) -> u64 {
        crc::Crc::<u64>::new(&crc::CRC_64_REDIS).checksum(b)
    }

    /// Appends an RDB string (length-prefixed, uncompressed).
    pub fn push_string(out: &mut Vec<u8>, s: &[u8]) {
        let n = s.len();
        if n < 1 << 6 {
            out.push(n as u8);
        } else if n < 1 << 14 {
            out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
        } else if n <= u32::MAX as usize {
            out.push(0x80);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0x81);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
        out.extend_from_slice(s);
    }

    /// Appends the trailer: RDB version and CRC-64, little-endian.
    pub fn seal(out: &mut Vec<u8>) {
        out.extend_from_slice(&RDB_VERSION.to_le_bytes());
        let sum = crc64(out);
        out.extend_from_slice(&sum.to_le_bytes());
    }

    const BAD: &str = "payload version or checksum are wrong";

    struct Reader<'a> {
        b: &'a [u8],
        at: usize,
    }

    impl Reader<'_> {
        fn take(&mut self, n: usize) -> Result<&[u8], String> {
            if self.b.len() - self.at < n {
                return Err("Failed loading library: unexpected end of payload".into());
            }
            self.at += n;
            Ok(&self.b[self.at - n..self.at])
        }

        /// A length, or `Err(Ok(kind))` for a special encoding.
        fn len(&mut self) -> Result<Result<u64, u8>, String> {
            let first = self.take(1)?[0];
            Ok(match first >> 6 {
                0 => Ok((first & 0x3f) as u64),
                1 => Ok((((first & 0x3f) as u64) << 8) | self.take(1)?[0] as u64),
                2 if first == 0x80 => {
                    Ok(u32::from_be_bytes(self.take(4)?.try_into().expect("4")) as u64)
                }
                2 if first == 0x81 => Ok(u64::from_be_bytes(self.take(8)?.try_into().expect("8"))),
                3 => Err(first & 0x3f),
                _ => return Err("Failed loading library: bad length".into()),
            })
        }

        fn number(&mut self) -> Result<usize, String> {
            match self.len()? {
                Ok(n) if n <= self.b.len() as u64 * 16 + 64 => Ok(n as usize),
                _ => Err("Failed loading library: bad length".into()),
            }
        }

        fn string(&mut self) -> Result<Vec<u8>, String> {
            match self.len()? {
                Ok(n) => {
                    let n = usize::try_from(n).map_err(|_| "Failed loading library: bad length")?;
                    Ok(self.take(n)?.to_vec())
                }
                Err(0) => Ok((self.take(1)?[0] as i8).to_string().into_bytes()),
                Err(1) => Ok(i16::from_le_bytes(self.take(2)?.try_into().expect("2"))
                    .to_string()
                    .into_bytes()),
                Err(2) => Ok(i32::from_le_bytes(self.take(4)?.try_into().expect("4"))
                    .to_string()
                    .into_bytes()),
                Err(3) => {
                    let clen = self.number()?;
                    let len = self.number()?;
                    let packed = self.take(clen)?;
                    // A compressed string expands at most about 256-fold (a back
                    // reference of 264 bytes per 2), which bounds the claimed length.
                    if len > clen.saturating_mul(264) {
                        return Err("Failed loading library: bad compressed string".into());
                    }
                    lzf_decompress(packed, len)
                        .ok_or_else(|| "Failed loading library: bad compressed string".into())
                }
                Err(_) => Err("Failed loading library: unknown string encoding".into()),
            }
        }
    }

    /// LZF's decompression (Redis compresses RDB strings with it), into exactly `len`
    /// bytes or `None`.
    fn lzf_decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        let mut i = 0;
        while i < input.len() {
            let ctrl = input[i] as usize;
            i += 1;
            if ctrl < 32 {
                let run = ctrl + 1;
                if out.len() + run > len {
                    return None;
                }
                out.extend_from_slice(input.get(i..i + run)?);
                i += run;
            } else {
                let mut n = ctrl >> 5;
                if n == 7 {
                    n += *input.get(i)? as usize;
                    i += 1;
                }
                let back = ((ctrl & 0x1f) << 8) + *input.get(i)? as usize + 1;
                i += 1;
                let n = n + 2;
                if back > out.len() || out.len() + n > len {
                    return None;
                }
                let start = out.len() - back;
                for k in 0..n {
                    out.push(out[start + k]);
                }
            }
        }
        (out.len() == len).then_some(out)
    }

    /// The libraries' codes in `payload`, after its trailer is checked.
    pub fn parse(payload: &[u8]) -> Result<Vec<Vec<u8>>, String> {
        if payload.len() < 10 {
            return Err(BAD.into());
        }
        let (body, sum) = payload.split_at(payload.len() - 8);
        let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
        let sum = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
        if version > RDB_VERSION || (sum != 0 && crc64(body) != sum) {
            return Err(BAD.into());
        }
        let mut r = Reader {
            b: &body[..body.len() - 2],
            at: 0,
        };
        let mut out = Vec::new();
        while r.at < r.b.len() {
            if r.take(1)?[0] != OPCODE_FUNCTION2 {
                return Err("given type is not a function".into());
            }
            out.push(r.string()?);
        }
        Ok(out)
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn round_trip_and_damage() {
            let mut p = vec![OPCODE_FUNCTION2];
            push_string(&mut p, &vec![b'x'; 20_000]);
            p.push(OPCODE_FUNCTION2);
            push_string(&mut p, b"#!lua name=a\n");
            seal(&mut p);
            let codes = parse(&p).unwrap();
            assert_eq!(codes[0].len(), 20_000);
            assert_eq!(codes[1], b"#!lua name=a\n");
            let mut bad = p.clone();
            bad[3] ^= 1;
            assert!(parse(&bad).is_err());
            assert!(parse(b"bad_payload").is_err());
        }

        #[test]
        fn lzf() {
            // "aaaaaaaaaa": a literal 'a', then a back reference of 9 bytes at distance 1.
            assert_eq!(
                lzf_decompress(&[0, b'a', 7 << 5, 0, 0], 10).unwrap(),
                b"aaaaaaaaaa"
            );
            assert!(lzf_decompress(&[0, b'a', 7 << 5, 0, 0], 5).is_none());
            assert!(lzf_decompress(&[1 << 5, 5], 3).is_none());
        }
    }
}
