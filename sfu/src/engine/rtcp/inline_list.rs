//! A list stored inline with a fixed capacity, so RTCP items never touch the heap.

use std::fmt;
use std::ops::Deref;

/// Up to `N` values of `T`, stored inline. Pushing past `N` fails instead of allocating.
#[derive(Clone, Copy)]
pub struct InlineList<T: Copy + Default, const N: usize> {
    items: [T; N],
    len: usize,
}

/// The list already holds its capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("inline list full")]
pub struct Full;

impl<T: Copy + Default, const N: usize> InlineList<T, N> {
    /// How many values the list can hold.
    pub const CAPACITY: usize = N;

    /// An empty list.
    pub fn new() -> Self {
        Self {
            items: [T::default(); N],
            len: 0,
        }
    }

    /// Appends `value`, or fails when the list is full.
    pub fn push(&mut self, value: T) -> Result<(), Full> {
        let slot = self.items.get_mut(self.len).ok_or(Full)?;
        *slot = value;
        self.len += 1;
        Ok(())
    }

    /// The last value, to extend it in place.
    pub fn last_mut(&mut self) -> Option<&mut T> {
        self.items[..self.len].last_mut()
    }
}

impl<T: Copy + Default, const N: usize> Default for InlineList<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy + Default, const N: usize> Deref for InlineList<T, N> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.items[..self.len]
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for InlineList<T, N> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Copy + Default + Eq, const N: usize> Eq for InlineList<T, N> {}

impl<T: Copy + Default + fmt::Debug, const N: usize> fmt::Debug for InlineList<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: Copy + Default, const N: usize> TryFrom<&[T]> for InlineList<T, N> {
    type Error = Full;

    fn try_from(values: &[T]) -> Result<Self, Full> {
        let mut list = Self::new();
        for &value in values {
            list.push(value)?;
        }
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_stops_at_capacity() {
        let mut list = InlineList::<u8, 2>::new();
        assert_eq!(list.push(1), Ok(()));
        assert_eq!(list.push(2), Ok(()));
        assert_eq!(list.push(3), Err(Full));
        assert_eq!(&*list, &[1, 2]);
        assert_eq!(InlineList::<u8, 2>::CAPACITY, 2);
    }

    #[test]
    fn equality_compares_the_values() {
        let mut a = InlineList::<u8, 3>::try_from(&[1, 9][..]).unwrap();
        let b = InlineList::<u8, 3>::try_from(&[1][..]).unwrap();
        assert_ne!(a, b);
        *a.last_mut().unwrap() = 0;
        assert_ne!(a, b);
        let c = InlineList::<u8, 3>::try_from(&[1, 0][..]).unwrap();
        assert_eq!(a, c);
        assert_eq!(InlineList::<u8, 1>::try_from(&[1, 2][..]), Err(Full));
    }
}
