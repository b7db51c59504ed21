//! XOR parity over equal-length chunks, for reconstructing a chunk held by a set in NDWIN
//! from the sets in DTWIN (paper 001, sec. 4.2 "Data reconstruction for NDWIN"). The striping
//! itself belongs to the engine's I/O layer; this module only does the arithmetic.
//!
//! Chunks may be shorter than the stripe unit: a short chunk counts as zero-padded, so the
//! caller must remember each chunk's true length.

/// XORs `data` into `acc` (`data` may be shorter than `acc`; the rest counts as zeroes).
pub fn xor_into(acc: &mut [u8], data: &[u8]) {
    assert!(
        data.len() <= acc.len(),
        "chunk longer than the parity buffer"
    );
    for (a, d) in acc.iter_mut().zip(data) {
        *a ^= d;
    }
}

/// The parity of a stripe: the XOR of all chunks, as long as the longest one.
pub fn parity<C: AsRef<[u8]>>(chunks: &[C]) -> Vec<u8> {
    let len = chunks.iter().map(|c| c.as_ref().len()).max().unwrap_or(0);
    let mut p = vec![0u8; len];
    for c in chunks {
        xor_into(&mut p, c.as_ref());
    }
    p
}

/// Rebuilds the one missing chunk of a stripe from the other chunks and the parity;
/// `len` is the missing chunk's true length (at most the parity's length).
pub fn reconstruct<C: AsRef<[u8]>>(survivors: &[C], parity: &[u8], len: usize) -> Vec<u8> {
    assert!(len <= parity.len(), "missing chunk longer than the parity");
    let mut out = parity.to_vec();
    for c in survivors {
        xor_into(&mut out, c.as_ref());
    }
    out.truncate(len);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rebuilds_each_chunk() {
        let chunks: Vec<Vec<u8>> = vec![
            (0..100u8).collect(),
            (0..100u8).map(|x| x.wrapping_mul(7)).collect(),
            (0..60u8).map(|x| x ^ 0x5a).collect(),
        ];
        let p = parity(&chunks);
        for missing in 0..chunks.len() {
            let others: Vec<&Vec<u8>> = chunks
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != missing)
                .map(|(_, c)| c)
                .collect();
            let got = reconstruct(&others, &p, chunks[missing].len());
            assert_eq!(got, chunks[missing]);
        }
    }
}
