//! The binary's global allocator: mimalloc, asked for plain blocks where their natural
//! alignment suffices.
//!
//! Why not the `mimalloc` crate's `MiMalloc`: it calls `mi_malloc_aligned(size, align)` for
//! every allocation. That call's fast path takes a free block of the size's own bin; when the
//! bin's free list is empty it falls back to a generic path that, for a size whose bin is not
//! a power of two (24, 40, 48, 120, ... bytes), over-allocates `size + align - 1` bytes from a
//! *larger* bin. Nothing then refills the first bin (only mimalloc's generic `malloc` path
//! collects a bin's freed blocks), so every later allocation of that size class takes the slow
//! path too: about 8 of a prepared point write's 60 allocations did, 175 instructions each,
//! and each used a larger block than it needed (callgrind).
//!
//! Every mimalloc block size is a multiple of 8 bytes and every page's blocks start at an
//! address aligned to at least 16, so a block from `mi_malloc` is 8-byte aligned: layouts
//! aligned to 8 or less (nearly all of Rust's) go to `mi_malloc`/`mi_zalloc`/`mi_realloc`,
//! whose slow path refills the bin; larger alignments keep the aligned calls.

use libmimalloc_sys as mi;
use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

/// Alignment every `mi_malloc` block has (see the module doc).
const PLAIN_ALIGN: usize = 8;

/// See the module doc.
pub struct Allocator;

// SAFETY: every call hands mimalloc's own blocks back to mimalloc; a block from `mi_malloc` is
// aligned to `PLAIN_ALIGN` (module doc), larger alignments use mimalloc's aligned calls.
unsafe impl GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN {
            mi::mi_malloc(layout.size()) as *mut u8
        } else {
            mi::mi_malloc_aligned(layout.size(), layout.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN {
            mi::mi_zalloc(layout.size()) as *mut u8
        } else {
            mi::mi_zalloc_aligned(layout.size(), layout.align()) as *mut u8
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi::mi_free(ptr as *mut c_void);
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if layout.align() <= PLAIN_ALIGN {
            mi::mi_realloc(ptr as *mut c_void, new_size) as *mut u8
        } else {
            mi::mi_realloc_aligned(ptr as *mut c_void, new_size, layout.align()) as *mut u8
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every small size come back aligned as their layout asks, for alignments the
    /// plain calls serve and larger ones, also after a reallocation; zeroed ones are zero.
    #[test]
    fn blocks_have_their_layouts_alignment() {
        let a = Allocator;
        for align in [1usize, 2, 4, 8, 16, 64, 4096] {
            let mut held = Vec::new();
            for size in (1..=2048).step_by(7) {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: non-zero size; freed below with the same layout.
                let p = unsafe { a.alloc(layout) };
                assert!(!p.is_null());
                assert_eq!(p as usize % align, 0, "size {size} align {align}");
                held.push((p, layout));
            }
            for (p, layout) in held {
                // SAFETY: allocated above with `layout`.
                let q = unsafe { a.realloc(p, layout, layout.size() * 3) };
                assert_eq!(q as usize % align, 0, "realloc align {align}");
                let grown = Layout::from_size_align(layout.size() * 3, align).unwrap();
                // SAFETY: reallocated above to `grown`.
                unsafe { a.dealloc(q, grown) };
            }
            let layout = Layout::from_size_align(200, align).unwrap();
            // SAFETY: non-zero size; freed right after.
            let z = unsafe { a.alloc_zeroed(layout) };
            // SAFETY: 200 bytes were allocated at `z`.
            assert!(unsafe { std::slice::from_raw_parts(z, 200) }
                .iter()
                .all(|&b| b == 0));
            // SAFETY: allocated above with `layout`.
            unsafe { a.dealloc(z, layout) };
        }
    }
}
