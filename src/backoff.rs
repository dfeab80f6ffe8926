//! Capped exponential backoff: the waits between retries of the applier's
//! blocks and between reconnects to a lost master. Knows nothing of the
//! pipeline.

use std::time::Duration;

/// Capped exponential backoff: `initial`, doubled after each attempt, never
/// longer than `max` (a `max` below `initial` waits `max` every time).
#[derive(Clone, Debug)]
pub struct Backoff {
    initial: Duration,
    next: Duration,
    max: Duration,
    attempts: u32,
}

impl Backoff {
    /// A backoff starting at `initial`, never waiting longer than `max`.
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial: initial.min(max),
            next: initial.min(max),
            max,
            attempts: 0,
        }
    }

    /// The wait before the next attempt; doubles the following one, up to
    /// the cap.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        self.attempts += 1;
        delay
    }

    /// How many waits were handed out since the start or the last
    /// [`Backoff::reset`].
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Back to the first wait (the operation made progress).
    pub fn reset(&mut self) {
        self.next = self.initial;
        self.attempts = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_its_cap_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(500));
        let delays: Vec<u64> = (0..5).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(delays, [100, 200, 400, 500, 500]);
        assert_eq!(b.attempts(), 5);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
        assert_eq!(b.attempts(), 1);
    }
}
