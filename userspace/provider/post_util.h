// Helpers shared by the two ways of posting sends: ibv_post_send (post.cc) and the extended
// ibv_wr_* API (wr_api.cc). Callers hold the QP's send lock.
#ifndef SROCE_PROVIDER_POST_UTIL_H
#define SROCE_PROVIDER_POST_UTIL_H

#include "provider.h"

namespace sroce::provider {

uint32_t wc_opcode_for(ibv_wr_opcode op);
bool opcode_valid(ibv_qp_type type, ibv_wr_opcode op);
bool send_state_ok(const Qp* qp);
// Room for one more WQE at ring index `prod` / shadow index `shadow_head`.
bool send_space(Qp* qp, uint32_t prod, uint32_t shadow_head);
void record_send(Qp* qp, uint32_t shadow_index, uint64_t wr_id, uint32_t flags, ibv_wr_opcode op);
// A BIND_MW WQE (mw.cc): the window by the handle sroced knows, the MR by its lkey.
int fill_bind(sroce_send_wqe* w, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* info);

}  // namespace sroce::provider

#endif  // SROCE_PROVIDER_POST_UTIL_H
