//! Fixed-priority assignment: Rate Monotonic (Liu & Layland 1973) and Deadline Monotonic
//! (Leung & Whitehead 1982; optimal among fixed-priority orders for constrained deadlines with
//! synchronous release, Audsley et al. 1991).

use crate::Timing;

/// Task indices from highest to lowest priority, shorter period first; ties by index.
pub fn rate_monotonic(ts: &[Timing]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ts.len()).collect();
    order.sort_by_key(|&i| (ts[i].t, i));
    order
}

/// Task indices from highest to lowest priority, shorter deadline first; ties by period, then index.
pub fn deadline_monotonic(ts: &[Timing]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..ts.len()).collect();
    order.sort_by_key(|&i| (ts[i].d, ts[i].t, i));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders() {
        let ts = [
            Timing::new(1, 9, 10),
            Timing::new(1, 4, 20),
            Timing::implicit(1, 5),
        ];
        assert_eq!(rate_monotonic(&ts), vec![2, 0, 1]);
        assert_eq!(deadline_monotonic(&ts), vec![1, 2, 0]);
    }
}
