//! A fixed-capacity ring buffer that overwrites the oldest element when full.

pub struct RingBuffer<T> {
    items: Vec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> RingBuffer<T> {
    pub fn with_capacity(capacity: usize) -> Self {
        assert!(capacity > 0, "a ring buffer needs room for one element");
        let mut items = Vec::with_capacity(capacity);
        items.resize_with(capacity, || None);
        RingBuffer { items, head: 0, len: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.items.len()
    }

    /// Appends `value`; returns the element it pushed out, if the buffer was full.
    pub fn push(&mut self, value: T) -> Option<T> {
        let tail = (self.head + self.len) % self.capacity();
        let evicted = self.items[tail].replace(value);
        if self.len == self.capacity() {
            self.head = (self.head + 1) % self.capacity();
        } else {
            self.len += 1;
        }
        evicted
    }

    /// Removes and returns the oldest element.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let value = self.items[self.head].take();
        self.head = (self.head + 1) % self.capacity();
        self.len -= 1;
        value
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len).filter_map(move |i| {
            let index = (self.head + i) % self.capacity();
            self.items[index].as_ref()
        })
    }
}
