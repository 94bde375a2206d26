// Memory windows (IBA 10.6.7; docs/provider.md "Memory windows"): ibv_alloc_mw /
// ibv_dealloc_mw are control messages to sroced (the kernel path's are uverbs commands,
// kernel_path.cc), ibv_bind_mw (type 1) and IBV_WR_BIND_MW (type 2) are send-queue WQEs that
// sroced's engine runs in order with the other WRs of the QP.
#include <errno.h>
#include <string.h>

#include <new>

#include "post_util.h"
#include "provider.h"

namespace sroce::provider {

int fill_bind(sroce_send_wqe* w, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info) {
  if (mw == nullptr || info == nullptr) return EINVAL;
  // No MR only for an unbind (zero length), as libibverbs' ibv_bind_mw requires.
  if (info->mr == nullptr && (info->addr != 0 || info->length != 0)) return EINVAL;
  w->opcode = IBV_WR_BIND_MW;
  w->num_sge = 0;
  w->send_flags &= ~uint32_t{IBV_SEND_INLINE};
  w->remote_addr = info->addr;
  w->compare_add = info->length;
  w->rkey = rkey;
  const uint32_t lkey = info->mr != nullptr ? info->mr->lkey : 0;
  w->swap = (static_cast<uint64_t>(lkey) << 32) | reinterpret_cast<Mw*>(mw)->wqe_handle;
  w->imm_data = info->mw_access_flags;
  return 0;
}

ibv_mw* verb_alloc_mw(ibv_pd* ibpd, ibv_mw_type type) {
  auto* mw = new (std::nothrow) Mw();
  if (mw == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  sroce_alloc_mw req{};
  req.pd = ibpd->handle;
  req.type = static_cast<uint8_t>(type);
  sroce_alloc_mw_resp resp{};
  int err = to_ctx(ibpd->context)
                ->st->control.call(SROCE_OP_ALLOC_MW, &req, sizeof(req), &resp, sizeof(resp));
  if (err != 0) {
    delete mw;
    errno = err;
    return nullptr;
  }
  mw->mw.context = ibpd->context;
  mw->mw.pd = ibpd;
  mw->mw.rkey = resp.rkey;
  mw->mw.handle = resp.handle;
  mw->mw.type = type;
  mw->wqe_handle = resp.handle;
  return &mw->mw;
}

int verb_dealloc_mw(ibv_mw* ibmw) {
  sroce_handle_req req{ibmw->handle, 0};
  int err = to_ctx(ibmw->context)
                ->st->control.call(SROCE_OP_DEALLOC_MW, &req, sizeof(req), nullptr, 0);
  if (err == EIO) err = 0;  // sroced gone: the window is gone with it
  if (err == 0) delete reinterpret_cast<Mw*>(ibmw);
  return err;
}

// ibv_bind_mw (type 1): a BIND_MW WQE whose new R_Key is the next key byte; the window's
// rkey changes at once (the verbs give it back to the caller before the bind completes, as
// rxe and mlx5 do), and the engine refuses the old one from the bind on.
int verb_bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  if (mw->type != IBV_MW_TYPE_1 || bind == nullptr) return EINVAL;
  if (bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED) return EINVAL;
  ibv_send_wr wr{};
  wr.wr_id = bind->wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = bind->send_flags;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = bind->bind_info;
  ibv_send_wr* bad = nullptr;
  int err = verb_post_send(qp, &wr, &bad);
  if (err == 0) mw->rkey = wr.bind_mw.rkey;
  return err;
}

}  // namespace sroce::provider
