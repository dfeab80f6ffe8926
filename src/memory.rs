//! Process-wide allocator settings.
//!
//! glibc's malloc gives threads that contend for it arenas of their own
//! (up to 8 per core), and memory freed into one arena is reused only by
//! the threads of that arena. `shardrep run` allocates a transaction on
//! the extractor thread, frees it on an apply channel, and has a dozen
//! busy threads (extractor, scheduler, channels, sled's I/O pool): with
//! the default, each arena kept its own high-water mark, and the resident
//! size of a 1 GiB catch-up (`bench/memory.sh`) was about 70 MiB above the
//! live heap (measured: heaptrack's peak heap against VmHWM). Two arenas
//! brought its peak from 319 MiB to 242-255 MiB over three runs (one with
//! `MALLOC_ARENA_MAX=2` in the environment, two with this call), with
//! elapsed times (110-212 s) within the run-to-run spread of the shared
//! machine it was measured on.

/// glibc's `mallopt` parameter number of `M_ARENA_MAX` (malloc.h).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const M_ARENA_MAX: i32 = -8;

/// Number of malloc arenas the binaries use (glibc only).
pub const MALLOC_ARENAS: i32 = 2;

/// Limits glibc's malloc to [`MALLOC_ARENAS`] arenas, unless the
/// environment sets `MALLOC_ARENA_MAX` itself (glibc then follows it).
/// Call first thing in `main`, before any thread starts. Returns whether
/// the limit was set (false on other C libraries and platforms).
pub fn limit_malloc_arenas() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var_os("MALLOC_ARENA_MAX").is_some() {
            return false;
        }
        extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        // SAFETY: mallopt only sets an allocator parameter; glibc
        // documents M_ARENA_MAX as settable at any time, and it is called
        // before other threads exist.
        unsafe { mallopt(M_ARENA_MAX, MALLOC_ARENAS) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn arena_limit_is_accepted() {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            assert!(super::limit_malloc_arenas());
        }
    }
}
