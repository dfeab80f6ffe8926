//! Process-wide allocator settings.
//!
//! Every binary, test and benchmark linked with this library allocates
//! through jemalloc (the `tikv-jemallocator` crate, jemalloc 5.3) on Linux
//! with glibc. `shardrep run` allocates a transaction on one thread (the
//! extractor, or the queue feed) and frees it on another (an apply
//! channel), at tens of thousands of transactions a second and dozens of
//! allocations each. glibc's malloc spent about a quarter of shardrep's CPU
//! on that (issue 17: `_int_malloc`, `_int_free`, `malloc_consolidate`,
//! `unlink_chunk`, and futex waits on its arena locks in a `perf` profile
//! of the catch-up benchmark), and bounding its resident size had taken two
//! arenas and a fixed mmap threshold, which made it slower still.
//!
//! jemalloc frees into per-thread caches and returns unused pages on a
//! timer. With the settings of [`JEMALLOC_CONF`], `bench/memory.sh` (1.19
//! GB backlog, 301,931 transactions, live source, 8 channels, one run
//! each, same binary otherwise) measured 56-58 CPU µs per transaction and
//! a peak RSS of 151-155 MiB, against 75 µs and 202 MiB with glibc tuned as
//! before; jemalloc's defaults (10 s decay) gave 56 µs and 231 MiB.

/// jemalloc's options (`opt.*` of jemalloc(3)), compiled in: a background
/// thread returns freed pages to the system, dirty pages after 1,000 ms
/// (default 10,000) and without keeping them as "muzzy" pages first. The
/// environment variable `_RJEM_MALLOC_CONF` (this build's prefixed name of
/// `MALLOC_CONF`) is read after it and overrides any of them.
pub const JEMALLOC_CONF: &str = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0";

#[cfg(all(target_os = "linux", not(target_env = "musl")))]
mod jemalloc {
    /// The process's allocator.
    #[global_allocator]
    static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

    /// A C string pointer that may live in a `static`.
    #[repr(transparent)]
    pub struct ConfPtr(*const std::ffi::c_char);

    // SAFETY: the pointer is to a `'static` byte string that is never
    // written; sharing it between threads is sharing a `&'static [u8]`.
    unsafe impl Sync for ConfPtr {}

    /// [`super::JEMALLOC_CONF`] NUL-terminated.
    const CONF: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

    const _: () = {
        // The C string and the documented constant are the same text.
        let (a, b) = (super::JEMALLOC_CONF.as_bytes(), CONF);
        assert!(a.len() + 1 == b.len());
        let mut i = 0;
        while i < a.len() {
            assert!(a[i] == b[i]);
            i += 1;
        }
    };

    /// jemalloc's `malloc_conf` (the name `tikv-jemalloc-sys` gives it in
    /// its prefixed build): read once, when the first allocation is made.
    #[export_name = "_rjem_malloc_conf"]
    pub static MALLOC_CONF: ConfPtr = ConfPtr(CONF.as_ptr().cast());
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
    /// jemalloc is the allocator and took the compiled-in options.
    #[cfg(all(target_os = "linux", not(target_env = "musl")))]
    #[test]
    fn jemalloc_runs_with_its_background_thread() {
        let v: Vec<u8> = vec![1; 1 << 20];
        drop(v);
        if std::env::var_os("_RJEM_MALLOC_CONF").is_some() {
            return;
        }
        // The background thread is named by jemalloc and is a thread of
        // this process once an allocation has been made.
        let named = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.unwrap().path().join("comm")).ok())
            .any(|c| c.trim() == "jemalloc_bg_thd");
        assert!(
            named,
            "no jemalloc_bg_thd thread: the compiled-in options were not read"
        );
    }
}
