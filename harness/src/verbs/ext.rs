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
    if (*ctx).abi_compat as usize != usize::MAX {
        return None;
    }
    Some(ctx.cast::<u8>().sub(offset_of!(verbs_context, context)).cast::<verbs_context>())
}

/// `verbs_get_ctx_op`: the extended context, if the library's is big enough to
/// hold `$field` and the provider set it.
macro_rules! ctx_op {
    ($ctx:expr, $field:ident) => {
        match verbs_ctx($ctx) {
            Some(vc)
                if (*vc).sz >= size_of::<verbs_context>() - offset_of!(verbs_context, $field) =>
            {
                (*vc).$field
            }
            _ => None,
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
        let ret = op(ctx, ptr::null(), attr, size_of::<ibv_device_attr_ex>());
        if ret != libc::EOPNOTSUPP && ret != libc::ENOSYS {
            return ret;
        }
    }
    ptr::write_bytes(attr, 0, 1);
    ibv_query_device(ctx, &mut (*attr).orig_attr)
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
    if (*init).comp_mask == ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0 {
        return ibv_create_qp((*init).pd, init.cast::<ibv_qp_init_attr>());
    }
    match ctx_op!(ctx, create_qp_ex) {
        Some(op) => op(ctx, init),
        None => {
            *libc::__errno_location() = libc::EOPNOTSUPP;
            ptr::null_mut()
        }
    }
}
