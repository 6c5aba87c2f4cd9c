//! Bit-granular reading and writing over byte slices, most significant bit first, as the AV1 RTP
//! specification's `f(n)` and `ns(n)` describe. Neither type allocates.

/// The reader ran past the end of its slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BitsExhausted;

/// The writer's buffer is too small for what was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferFull;

/// Reads bit fields from a byte slice. Every read is bounds checked and fails with
/// [`BitsExhausted`] instead of reading past the end.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    data: &'a [u8],
    /// Position in bits from the start of `data`.
    pos: usize,
}

impl<'a> BitReader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    /// Bits read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bits left before the end of the slice.
    pub fn remaining(&self) -> usize {
        self.data.len() * 8 - self.pos
    }

    /// `f(n)`: an unsigned `n`-bit value, `n <= 32`.
    pub fn read(&mut self, n: u32) -> Result<u32, BitsExhausted> {
        debug_assert!(n <= 32, "read of {n} bits");
        if n as usize > self.remaining() {
            return Err(BitsExhausted);
        }
        let mut value: u64 = 0;
        let mut left = n;
        while left > 0 {
            // In bounds: `remaining()` covered all `n` bits above.
            let byte = self.data[self.pos / 8];
            let avail = 8 - (self.pos % 8) as u32;
            let take = avail.min(left);
            let chunk = (u32::from(byte) >> (avail - take)) & ((1 << take) - 1);
            value = (value << take) | u64::from(chunk);
            self.pos += take as usize;
            left -= take;
        }
        // At most 32 bits were shifted in.
        Ok(value as u32)
    }

    pub fn read_bit(&mut self) -> Result<bool, BitsExhausted> {
        Ok(self.read(1)? == 1)
    }

    /// `ns(n)`: a non-symmetric unsigned value in `0..n`, coded in `w - 1` or `w` bits where `w`
    /// is the bit width of `n`. `n` must be at least 1; `ns(1)` reads nothing and is 0.
    pub fn read_ns(&mut self, n: u32) -> Result<u32, BitsExhausted> {
        debug_assert!(n >= 1, "ns(0) has no values");
        let w = bit_width(n);
        let m = (1u32 << w) - n;
        let v = self.read(w - 1)?;
        if v < m {
            return Ok(v);
        }
        let extra = self.read(1)?;
        Ok((v << 1) - m + extra)
    }
}

/// Writes bit fields into a caller's byte slice. Whole bytes are stored as they fill, so the
/// buffer may hold anything beforehand; [`BitWriter::finish`] stores the last partial byte with
/// zero padding.
#[derive(Debug)]
pub struct BitWriter<'a> {
    buf: &'a mut [u8],
    /// Bytes stored so far.
    len: usize,
    /// Pending bits, right-aligned; fewer than 8 between calls.
    acc: u64,
    acc_bits: u32,
}

impl<'a> BitWriter<'a> {
    pub fn new(buf: &'a mut [u8]) -> Self {
        Self {
            buf,
            len: 0,
            acc: 0,
            acc_bits: 0,
        }
    }

    /// Bits written so far.
    pub fn position(&self) -> usize {
        self.len * 8 + self.acc_bits as usize
    }

    /// Writes the low `n` bits of `value`, `n <= 32`.
    pub fn write(&mut self, value: u32, n: u32) -> Result<(), BufferFull> {
        debug_assert!(n <= 32, "write of {n} bits");
        if self.position() + n as usize > self.buf.len() * 8 {
            return Err(BufferFull);
        }
        let value = u64::from(value) & ((1u64 << n) - 1);
        // At most 7 + 32 bits pending: fits in 64.
        self.acc = (self.acc << n) | value;
        self.acc_bits += n;
        while self.acc_bits >= 8 {
            self.acc_bits -= 8;
            // In bounds: the whole write was checked against the buffer above.
            self.buf[self.len] = (self.acc >> self.acc_bits) as u8;
            self.len += 1;
        }
        self.acc &= (1 << self.acc_bits) - 1;
        Ok(())
    }

    pub fn write_bit(&mut self, bit: bool) -> Result<(), BufferFull> {
        self.write(u32::from(bit), 1)
    }

    /// The inverse of [`BitReader::read_ns`]; `value` must be below `n`.
    pub fn write_ns(&mut self, value: u32, n: u32) -> Result<(), BufferFull> {
        debug_assert!(value < n, "ns({n}) cannot hold {value}");
        let w = bit_width(n);
        let m = (1u32 << w) - n;
        if value < m {
            self.write(value, w - 1)
        } else {
            self.write(value + m, w)
        }
    }

    /// Stores the last partial byte, zero padded, and returns the number of bytes written.
    pub fn finish(mut self) -> Result<usize, BufferFull> {
        let pad = (8 - self.acc_bits % 8) % 8;
        self.write(0, pad)?;
        Ok(self.len)
    }
}

/// Size in bits of `value` written as `ns(n)`.
pub fn ns_size(value: u32, n: u32) -> u32 {
    let w = bit_width(n);
    let m = (1u32 << w) - n;
    if value < m {
        w - 1
    } else {
        w
    }
}

/// Number of bits needed to represent `n` (0 for 0).
fn bit_width(n: u32) -> u32 {
    u32::BITS - n.leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_msb_first_across_bytes() {
        let data = [0b1010_1100, 0b0101_0011];
        let mut r = BitReader::new(&data);
        assert_eq!(r.read(1), Ok(1));
        assert_eq!(r.read(3), Ok(0b010));
        assert_eq!(r.read(8), Ok(0b1100_0101));
        assert_eq!(r.remaining(), 4);
        assert_eq!(r.read(5), Err(BitsExhausted));
        assert_eq!(r.read(4), Ok(0b0011));
        assert_eq!(r.read(0), Ok(0));
        assert_eq!(r.read(1), Err(BitsExhausted));
    }

    #[test]
    fn reads_32_bits_unaligned() {
        let data = [0xFF, 0x12, 0x34, 0x56, 0x78];
        let mut r = BitReader::new(&data);
        assert_eq!(r.read(4), Ok(0xF));
        assert_eq!(r.read(32), Ok(0xF123_4567));
    }

    #[test]
    fn writer_overwrites_garbage_and_zero_pads() {
        let mut buf = [0xAA; 3];
        let mut w = BitWriter::new(&mut buf);
        w.write(0b1, 1).unwrap();
        w.write(0b0011, 4).unwrap();
        w.write(0x1FF, 9).unwrap();
        assert_eq!(w.finish(), Ok(2));
        assert_eq!(buf, [0b1001_1111, 0b1111_1100, 0xAA]);
    }

    #[test]
    fn writer_refuses_to_overflow() {
        let mut buf = [0; 1];
        let mut w = BitWriter::new(&mut buf);
        w.write(0, 6).unwrap();
        assert_eq!(w.write(0, 3), Err(BufferFull));
        assert_eq!(w.write(3, 2), Ok(()));
        assert_eq!(buf, [0b11]);
    }

    /// ns(5): w = 3, m = 3: values 0..3 take 2 bits, 3 and 4 take 3 bits (AV1 spec 4.10.7).
    #[test]
    fn ns_of_five_matches_spec_table() {
        let expected: [(u32, &str); 5] = [(0, "00"), (1, "01"), (2, "10"), (3, "110"), (4, "111")];
        for (value, code) in expected {
            assert_eq!(ns_size(value, 5) as usize, code.len());
            let mut buf = [0u8; 1];
            let mut w = BitWriter::new(&mut buf);
            w.write_ns(value, 5).unwrap();
            let bits = w.position();
            w.finish().unwrap();
            let written = format!("{:08b}", buf[0]);
            assert_eq!(&written[..bits], code, "ns(5) value {value}");
            let mut r = BitReader::new(&buf);
            assert_eq!(r.read_ns(5), Ok(value));
        }
    }

    #[test]
    fn ns_round_trips_every_value_up_to_33() {
        for n in 1..=33 {
            for value in 0..n {
                let mut buf = [0u8; 2];
                let mut w = BitWriter::new(&mut buf);
                w.write_ns(value, n).unwrap();
                assert_eq!(w.position() as u32, ns_size(value, n));
                w.finish().unwrap();
                let mut r = BitReader::new(&buf);
                assert_eq!(r.read_ns(n), Ok(value), "ns({n})");
                assert_eq!(r.position() as u32, ns_size(value, n));
            }
        }
    }

    #[test]
    fn ns_reports_truncation() {
        // ns(3) value 2 needs 2 bits; only the first is there.
        let mut r = BitReader::new(&[0xFF]);
        r.read(7).unwrap();
        assert_eq!(r.read_ns(3), Err(BitsExhausted));
    }
}
