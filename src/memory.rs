//! Process-wide allocator settings.
//!
//! glibc's malloc gives threads that contend for it arenas of their own
//! (up to 8 per core), and memory freed into one arena is reused only by
//! the threads of that arena. `shardrep run` allocates a transaction on
//! the extractor thread, frees it on an apply channel, and has a dozen
//! busy threads (extractor, scheduler, channels, then sled's I/O pool): with
//! the default, each arena kept its own high-water mark, and the resident
//! size of a 1 GiB catch-up (`bench/memory.sh`) was about 70 MiB above the
//! live heap (measured: heaptrack's peak heap against VmHWM). Two arenas
//! brought its peak from 319 MiB to 242-255 MiB over three runs (one with
//! `MALLOC_ARENA_MAX=2` in the environment, two with this call), with
//! elapsed times (110-212 s) within the run-to-run spread of the shared
//! machine it was measured on.
//!
//! glibc also raises its mmap threshold each time a large block that was
//! mmap'ed is freed (the "dynamic mmap threshold", up to 32 MiB on 64-bit),
//! after which 1 MiB statement buffers, the queue's I/O buffers and decoded
//! transactions come from the arenas and are kept there as free space
//! that cannot be trimmed. Fixing the threshold (which turns the dynamic
//! adjustment off, mallopt(3)) and the trim threshold took the peak of the
//! same catch-up from 266 MiB to 194-239 MiB (three runs; 240 MiB with a
//! 512 KiB threshold), and capping the client's buffer pool as well
//! ([`cap_client_buffer_pool`]) to 184-218 MiB (four runs, live and files
//! sources), with unchanged throughput (2,345-2,776 transactions/s).

/// glibc's `mallopt` parameter numbers (malloc.h).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod param {
    pub const M_TRIM_THRESHOLD: i32 = -1;
    pub const M_MMAP_THRESHOLD: i32 = -3;
    pub const M_ARENA_MAX: i32 = -8;
}

/// Number of malloc arenas the binaries use (glibc only).
pub const MALLOC_ARENAS: i32 = 2;

/// Allocations of at least this many bytes get their own mapping, returned
/// to the system when freed (glibc only).
pub const MALLOC_MMAP_THRESHOLD_BYTES: i32 = 128 * 1024;

/// Free memory at the top of an arena beyond this many bytes is returned to
/// the system (glibc only).
pub const MALLOC_TRIM_THRESHOLD_BYTES: i32 = 1024 * 1024;

/// Sets glibc's malloc to [`MALLOC_ARENAS`] arenas, a fixed mmap threshold
/// of [`MALLOC_MMAP_THRESHOLD_BYTES`] and a trim threshold of
/// [`MALLOC_TRIM_THRESHOLD_BYTES`]. Each is left alone when the environment
/// sets it (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`,
/// `MALLOC_TRIM_THRESHOLD_`: glibc then follows the environment). Call first
/// thing in `main`, before any thread starts. Returns how many of the three
/// were set (0 on other C libraries and platforms).
pub fn tune_malloc() -> usize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn mallopt(param: i32, value: i32) -> i32;
        }
        let mut set = 0;
        for (env, param, value) in [
            ("MALLOC_ARENA_MAX", param::M_ARENA_MAX, MALLOC_ARENAS),
            (
                "MALLOC_MMAP_THRESHOLD_",
                param::M_MMAP_THRESHOLD,
                MALLOC_MMAP_THRESHOLD_BYTES,
            ),
            (
                "MALLOC_TRIM_THRESHOLD_",
                param::M_TRIM_THRESHOLD,
                MALLOC_TRIM_THRESHOLD_BYTES,
            ),
        ] {
            if std::env::var_os(env).is_some() {
                continue;
            }
            // SAFETY: mallopt only sets an allocator parameter; glibc
            // documents these as settable at any time, and this runs
            // before other threads exist.
            if unsafe { mallopt(param, value) } == 1 {
                set += 1;
            }
        }
        set
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        0
    }
}

/// Largest buffer, in bytes, that mysql_async's process-wide buffer pool
/// keeps for reuse (its `MYSQL_ASYNC_BUFFER_SIZE_CAP`, default 4 MiB).
///
/// The pool holds up to 128 buffers and hands them out for every packet
/// read and every command written; each channel sends statements of up to
/// [`crate::applier::channel::BATCH_BYTES`], so with the default every
/// pooled buffer grew to a statement's size and stayed there: 19.5 MiB of
/// the 111 MiB live heap of `bench/memory.sh` a few seconds into the
/// catch-up (heaptrack). A larger packet still gets a buffer of its size;
/// it is shrunk to this when it goes back to the pool.
pub const CLIENT_BUFFER_POOL_SIZE_CAP_BYTES: usize = 64 * 1024;

/// Sets mysql_async's buffer-pool size cap to
/// [`CLIENT_BUFFER_POOL_SIZE_CAP_BYTES`] unless the environment sets
/// `MYSQL_ASYNC_BUFFER_SIZE_CAP` itself. mysql_async reads it once, when
/// the first connection is made; call first thing in `main`, before any
/// thread starts (it writes the process environment). Returns whether it
/// was set.
pub fn cap_client_buffer_pool() -> bool {
    const VAR: &str = "MYSQL_ASYNC_BUFFER_SIZE_CAP";
    if std::env::var_os(VAR).is_some() {
        return false;
    }
    std::env::set_var(VAR, CLIENT_BUFFER_POOL_SIZE_CAP_BYTES.to_string());
    true
}

#[cfg(test)]
mod tests {
    #[test]
    fn settings_are_accepted() {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let from_env = [
                "MALLOC_ARENA_MAX",
                "MALLOC_MMAP_THRESHOLD_",
                "MALLOC_TRIM_THRESHOLD_",
            ]
            .iter()
            .filter(|v| std::env::var_os(v).is_some())
            .count();
            assert_eq!(super::tune_malloc(), 3 - from_env);
        }
    }
}
