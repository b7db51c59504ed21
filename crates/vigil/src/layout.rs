//! Where the bytes of a striped file live (paper 001 sec. 4.2, "Data reconstruction").
//!
//! A file is cut into stripes of `n - 1` data chunks; each stripe adds one parity chunk (the
//! XOR of its data chunks), and the parity rotates over the `n` slots (RAID-5 style) so that
//! no kv-set holds all the parity. Slot `k` of a file is one device file on kv-set `k`; it
//! holds one chunk per stripe, at `stripe * chunk`, whether data or parity. A stripe's chunk
//! on any slot can therefore be rebuilt from the same offset on the other slots.
//!
//! The tail stripe may be partial: data chunk `j` then holds the bytes
//! `[j * chunk, (j + 1) * chunk)` of the stripe that exist (possibly none) and the parity is
//! as long as the longest of them. The logical length is recovered from the slot lengths
//! alone, so no separate size record is needed, and a torn tail (a slot shorter than the
//! others) yields the longest consistent prefix.

/// The stripe geometry of a volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Slots per stripe (n).
    pub slots: u32,
    pub chunk: u64,
}

/// Where one logical byte range that stays inside a single chunk lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub stripe: u64,
    pub slot: u32,
    /// Offset in the slot's device file.
    pub dev_offset: u64,
    pub len: usize,
    /// Offset of the piece in the caller's buffer.
    pub buf_offset: usize,
}

impl Layout {
    pub fn new(slots: u32, chunk: u64) -> Self {
        assert!(
            slots >= 2 && chunk > 0,
            "a stripe needs two slots and a chunk"
        );
        Layout { slots, chunk }
    }

    /// Logical bytes per full stripe.
    pub fn stripe_bytes(&self) -> u64 {
        (self.slots as u64 - 1) * self.chunk
    }

    pub fn parity_slot(&self, stripe: u64) -> u32 {
        (stripe % self.slots as u64) as u32
    }

    /// Slot of data chunk `j` of `stripe`.
    pub fn data_slot(&self, stripe: u64, j: u32) -> u32 {
        ((self.parity_slot(stripe) as u64 + 1 + j as u64) % self.slots as u64) as u32
    }

    /// Splits `[offset, offset + len)` into pieces that each stay inside one chunk.
    pub fn pieces(&self, offset: u64, len: usize) -> Vec<Piece> {
        let mut out = Vec::new();
        let mut pos = offset;
        let end = offset + len as u64;
        let sb = self.stripe_bytes();
        while pos < end {
            let stripe = pos / sb;
            let in_stripe = pos % sb;
            let j = (in_stripe / self.chunk) as u32;
            let in_chunk = in_stripe % self.chunk;
            let n = (self.chunk - in_chunk).min(end - pos);
            out.push(Piece {
                stripe,
                slot: self.data_slot(stripe, j),
                dev_offset: stripe * self.chunk + in_chunk,
                len: n as usize,
                buf_offset: (pos - offset) as usize,
            });
            pos += n;
        }
        out
    }

    /// The chunk of each slot for one stripe's data (`data.len() <= stripe_bytes()`):
    /// data chunks and the parity, indexed by slot (empty where a data chunk has no bytes).
    pub fn stripe_chunks(&self, stripe: u64, data: &[u8]) -> Vec<Vec<u8>> {
        let c = self.chunk as usize;
        let mut chunks = vec![Vec::new(); self.slots as usize];
        let mut datas = Vec::new();
        for j in 0..self.slots - 1 {
            let lo = (j as usize * c).min(data.len());
            let hi = ((j as usize + 1) * c).min(data.len());
            let d = data[lo..hi].to_vec();
            datas.push(d.clone());
            chunks[self.data_slot(stripe, j) as usize] = d;
        }
        chunks[self.parity_slot(stripe) as usize] = device::parity::parity(&datas);
        chunks
    }

    /// Device-file length of each slot for a logical length.
    pub fn slot_lens(&self, len: u64) -> Vec<u64> {
        let sb = self.stripe_bytes();
        let full = len / sb;
        let rem = len % sb;
        let mut out = vec![full * self.chunk; self.slots as usize];
        if rem > 0 {
            for j in 0..self.slots - 1 {
                let l = rem.saturating_sub(j as u64 * self.chunk).min(self.chunk);
                out[self.data_slot(full, j) as usize] += l;
            }
            out[self.parity_slot(full) as usize] += rem.min(self.chunk);
        }
        out
    }

    /// The longest logical length consistent with the slot lengths (a torn tail is cut).
    pub fn logical_len(&self, slot_lens: &[u64]) -> u64 {
        assert_eq!(slot_lens.len(), self.slots as usize);
        let full = slot_lens.iter().map(|l| l / self.chunk).min().unwrap_or(0);
        let base = full * self.chunk;
        let parity = slot_lens[self.parity_slot(full) as usize] - base;
        let mut rem = 0;
        for j in 0..self.slots - 1 {
            let have = slot_lens[self.data_slot(full, j) as usize] - base;
            // A data chunk longer than the parity was written without its parity: torn.
            let l = have.min(self.chunk).min(parity);
            rem += l;
            if l < self.chunk {
                break;
            }
        }
        full * self.stripe_bytes() + rem
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lens_round_trip() {
        let l = Layout::new(3, 16);
        for len in 0..200u64 {
            let lens = l.slot_lens(len);
            assert_eq!(l.logical_len(&lens), len, "len {len} lens {lens:?}");
        }
    }

    #[test]
    fn pieces_cover_the_range_in_order() {
        let l = Layout::new(4, 8);
        let p = l.pieces(5, 40);
        assert_eq!(p.iter().map(|x| x.len).sum::<usize>(), 40);
        assert_eq!(p[0].buf_offset, 0);
        for w in p.windows(2) {
            assert_eq!(w[0].buf_offset + w[0].len, w[1].buf_offset);
        }
        // Parity never holds data.
        for x in &p {
            assert_ne!(x.slot, l.parity_slot(x.stripe));
        }
    }

    #[test]
    fn torn_tail_gives_consistent_prefix() {
        let l = Layout::new(3, 16);
        let mut lens = l.slot_lens(70); // 2 full stripes (64) + 6 bytes
        let tail_data = l.data_slot(2, 0) as usize;
        lens[tail_data] -= 4;
        assert_eq!(l.logical_len(&lens), 66);
        let mut lens = l.slot_lens(70);
        lens[l.parity_slot(2) as usize] -= 6;
        assert_eq!(l.logical_len(&lens), 64);
    }
}
