//! The extended verbs that libibverbs declares `static inline` in verbs.h and that
//! reach the provider through `struct verbs_context`: `ibv_query_device_ex` and
//! `ibv_create_qp_ex`.
//!
//! rdma-sys 0.3 ports them, but its `verbs_get_ctx` compares `abi_compat` with
//! `u32::MAX`, where libibverbs marks an extended context with `UINTPTR_MAX`
//! (`__VERBS_ABI_IS_EXTENDED`). On a 64-bit host its ports therefore always take
//! the legacy path: `ibv_query_device_ex` never returns the extended capability
//! flags (FLUSH, ATOMIC WRITE …), and `ibv_create_qp_ex` with send-op flags fails
//! with EOPNOTSUPP. Found in the trixie lab, where `ibv_devinfo -v` shows
//! `device_cap_flags_ex: 0x1C001223C76` and rdma-sys's port gave 0. These follow
//! verbs.h instead.
//!
//! `struct verbs_context` grows at the front (new ops are added before the old
//! ones), so the ops rdma-core 44's headers know sit at the same distance from
//! `context` in a newer library's context, and `sz` says how far back it reaches.
//!
//! Owns: `query_device_ex` and `create_qp_ex`. Imports: `rdma_sys`'s types, libc's
//! errno; nothing of the crate.
use std::mem::{offset_of, size_of};
use std::ptr;

use rdma_sys::{
    ibv_context, ibv_create_qp, ibv_device_attr_ex, ibv_qp, ibv_qp_init_attr, ibv_qp_init_attr_ex,
    ibv_qp_init_attr_mask, ibv_query_device, verbs_context,
};

/// `verbs_get_ctx`: the extended context around `ctx`, if it is one.
///
/// # Safety
/// `ctx` is an open device context.
unsafe fn verbs_ctx(ctx: *mut ibv_context) -> Option<*mut verbs_context> {
    // SAFETY: the caller hands an open context, which is readable.
    if unsafe { (*ctx).abi_compat } as usize != usize::MAX {
        return None;
    }
    // SAFETY: an extended context (abi_compat says so) is the `context` member of the
    // `verbs_context` that libibverbs allocated around it, so stepping back by that member's
    // offset stays inside the same allocation.
    Some(
        unsafe { ctx.cast::<u8>().sub(offset_of!(verbs_context, context)) }.cast::<verbs_context>(),
    )
}

/// `verbs_get_ctx_op`: the extended context, if the library's is big enough to
/// hold `$field` and the provider set it. Used inside an `unsafe fn` whose caller
/// vouches for `$ctx` being an open device context.
macro_rules! ctx_op {
    ($ctx:expr, $field:ident) => {
        // SAFETY: `$ctx` is an open context (the enclosing function's contract); `sz` is
        // read before `$field`, and `$field` only when the library's context reaches it.
        unsafe {
            match verbs_ctx($ctx) {
                Some(vc)
                    if (*vc).sz
                        >= size_of::<verbs_context>() - offset_of!(verbs_context, $field) =>
                {
                    (*vc).$field
                }
                _ => None,
            }
        }
    };
}

/// `ibv_query_device_ex(ctx, NULL, attr)`.
///
/// # Safety
/// `ctx` is an open device context; `attr` points to writable memory for one
/// `ibv_device_attr_ex`.
pub(super) unsafe fn query_device_ex(ctx: *mut ibv_context, attr: *mut ibv_device_attr_ex) -> i32 {
    if let Some(op) = ctx_op!(ctx, query_device_ex) {
        // SAFETY: the provider's own op, called with the open context and the caller's
        // writable `attr` of the size we pass.
        let ret = unsafe { op(ctx, ptr::null(), attr, size_of::<ibv_device_attr_ex>()) };
        if ret != libc::EOPNOTSUPP && ret != libc::ENOSYS {
            return ret;
        }
    }
    // SAFETY: `attr` is writable for one `ibv_device_attr_ex` (the caller's contract), all
    // of whose fields are integers, for which zero is valid; `orig_attr` lies inside it.
    unsafe {
        ptr::write_bytes(attr, 0, 1);
        ibv_query_device(ctx, &mut (*attr).orig_attr)
    }
}

/// `ibv_create_qp_ex`: NULL with errno set when it fails, EOPNOTSUPP when the
/// library or provider has no extended QP creation.
///
/// # Safety
/// `ctx` is an open device context; `init` is valid and its PD, CQs and SRQ are
/// alive.
pub(super) unsafe fn create_qp_ex(
    ctx: *mut ibv_context,
    init: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    // SAFETY: `init` is valid (the caller's contract).
    if unsafe { (*init).comp_mask } == ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0 {
        // SAFETY: with only the PD in its mask, `ibv_qp_init_attr_ex` begins with the fields
        // of `ibv_qp_init_attr` in the same layout (verbs.h keeps them so for this path); the
        // PD and CQs it names are alive.
        return unsafe { ibv_create_qp((*init).pd, init.cast::<ibv_qp_init_attr>()) };
    }
    match ctx_op!(ctx, create_qp_ex) {
        // SAFETY: the provider's own op with the open context and a valid `init`.
        Some(op) => unsafe { op(ctx, init) },
        None => {
            // SAFETY: errno is this thread's own variable.
            unsafe { *libc::__errno_location() = libc::EOPNOTSUPP };
            ptr::null_mut()
        }
    }
}
