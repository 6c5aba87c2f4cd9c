//! A fixed-capacity vector stored inline, for per-packet lists whose bound the format gives.

use std::fmt;

/// Up to `N` values stored inline. Values past `len` are kept at their default so that the
/// derived layout compares and hashes by content.
#[derive(Clone, Copy)]
pub struct InlineVec<T: Copy + Default, const N: usize> {
    len: u8,
    items: [T; N],
}

/// The value did not fit: the list already holds its maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapacityExceeded;

impl<T: Copy + Default, const N: usize> InlineVec<T, N> {
    pub const CAPACITY: usize = N;

    pub fn new() -> Self {
        Self {
            len: 0,
            items: [T::default(); N],
        }
    }

    /// Copies `values`; fails if there are more than `N`.
    pub fn from_slice(values: &[T]) -> Result<Self, CapacityExceeded> {
        let mut out = Self::new();
        for &value in values {
            out.push(value)?;
        }
        Ok(out)
    }

    pub fn push(&mut self, value: T) -> Result<(), CapacityExceeded> {
        let slot = self
            .items
            .get_mut(usize::from(self.len))
            .ok_or(CapacityExceeded)?;
        *slot = value;
        self.len += 1;
        Ok(())
    }

    pub fn as_slice(&self) -> &[T] {
        &self.items[..usize::from(self.len)]
    }

    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.items[..usize::from(self.len)]
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T: Copy + Default, const N: usize> Default for InlineVec<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for InlineVec<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Default + Eq, const N: usize> Eq for InlineVec<T, N> {}

impl<T: Copy + Default + fmt::Debug, const N: usize> fmt::Debug for InlineVec<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl<T: Copy + Default, const N: usize> std::ops::Deref for InlineVec<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_up_to_capacity_then_refuses() {
        let mut v = InlineVec::<u16, 2>::new();
        v.push(7).unwrap();
        v.push(9).unwrap();
        assert_eq!(v.push(11), Err(CapacityExceeded));
        assert_eq!(v.as_slice(), &[7, 9]);
    }

    #[test]
    fn compares_by_content_only() {
        let a = InlineVec::<u8, 4>::from_slice(&[1, 2]).unwrap();
        let mut b = InlineVec::<u8, 4>::from_slice(&[1, 2, 3]).unwrap();
        assert_ne!(a, b);
        b = InlineVec::from_slice(&b[..2]).unwrap();
        assert_eq!(a, b);
    }
}
