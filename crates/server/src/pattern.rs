//! Redis glob patterns (`KEYS`, `SCAN MATCH`, `CONFIG GET`): `*`, `?`, `[abc]`, `[^a]`,
//! `[a-z]` and `\` escapes, matched on bytes.

/// Whether `text` matches `pattern`.
pub fn matches(pattern: &[u8], text: &[u8]) -> bool {
    // Iterative with one backtrack point for the last `*`: linear in practice and never
    // exponential, unlike the naive recursion.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    star = Some((p, t));
                    continue;
                }
                b'?' => {
                    p += 1;
                    t += 1;
                    continue;
                }
                b'[' => {
                    if let Some((hit, next)) = class(pattern, p, text[t]) {
                        if hit {
                            p = next;
                            t += 1;
                            continue;
                        }
                    } else if text[t] == b'[' {
                        // An unclosed `[` matches itself.
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == text[t] {
                        p += 2;
                        t += 1;
                        continue;
                    }
                }
                c => {
                    if c == text[t] {
                        p += 1;
                        t += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, st)) => {
                p = sp;
                t = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting at `pattern[start] == b'['`: whether it matched,
/// and the index after the closing `]`; `None` if the class is not closed.
fn class(pattern: &[u8], start: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut hit = false;
    let mut first = true;
    while i < pattern.len() {
        let mut lo = pattern[i];
        if lo == b']' && !first {
            return Some((hit != negate, i + 1));
        }
        first = false;
        if lo == b'\\' && i + 1 < pattern.len() {
            i += 1;
            lo = pattern[i];
        }
        if pattern.get(i + 1) == Some(&b'-') && i + 2 < pattern.len() && pattern[i + 2] != b']' {
            let hi = pattern[i + 2];
            let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
            hit |= (a..=b).contains(&c);
            i += 3;
        } else {
            hit |= lo == c;
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::matches;

    fn m(p: &str, t: &str) -> bool {
        matches(p.as_bytes(), t.as_bytes())
    }

    #[test]
    fn globs() {
        assert!(m("*", ""));
        assert!(m("*", "anything"));
        assert!(m("user:*", "user:42"));
        assert!(!m("user:*", "usr:42"));
        assert!(m("h?llo", "hello"));
        assert!(!m("h?llo", "hllo"));
        assert!(m("h*llo", "heeeello"));
        assert!(m("h[ae]llo", "hallo"));
        assert!(!m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo"));
        assert!(!m("h[^e]llo", "hello"));
        assert!(m("h[a-c]llo", "hbllo"));
        assert!(!m("h[a-c]llo", "hdllo"));
        assert!(m(r"h\*llo", "h*llo"));
        assert!(!m(r"h\*llo", "hello"));
        assert!(m("a*b*c", "axxbyyc"));
        assert!(!m("a*b*c", "axxbyy"));
        assert!(m("[", "["));
        assert!(m("*a", "banana"));
        assert!(!m("*a", "bananas"));
    }

    #[test]
    fn no_exponential_blowup() {
        let text = "a".repeat(10_000);
        assert!(!m("*a*a*a*a*a*a*a*a*b", &text));
    }
}
