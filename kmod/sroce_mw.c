// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Memory windows (IBA 10.6.7), type 1 and type 2B: uverbs' ALLOC_MW and
 * DEALLOC_MW mirrored to sroced, whose engine keeps the window, binds it when
 * a BIND_MW work request (in the send ring, never through uverbs) reaches the
 * requester, and checks its R_Key at the responder. The module only keeps
 * sroced's handle, which the provider gets back as driver data.
 */
#include "sroce.h"

int sroce_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct sroce_mw *mw = to_smw(ibmw);
	struct sroce_alloc_mw req = {
		.pd = to_spd(ibmw->pd)->handle,
		.type = (u8)ibmw->type,
	};
	struct sroce_alloc_mw_resp resp;
	struct sroce_kmw_resp kresp = {};
	int err;

	/* uverbs checked the type (1 or 2); kernel users have no windows. */
	if (!udata)
		return -EOPNOTSUPP;
	mw->uctx = sroce_uctx(udata);
	err = sroce_ucall(mw->uctx, SROCE_OP_ALLOC_MW, &req, sizeof(req),
			  NULL, 0, &resp, sizeof(resp));
	if (err)
		return err;
	mw->handle = resp.handle;
	ibmw->rkey = resp.rkey;
	kresp.handle = resp.handle;
	/* The provider must have room for sroced's handle. */
	err = udata->outlen < sizeof(kresp) ? -EINVAL :
	      ib_copy_to_udata(udata, &kresp, sizeof(kresp));
	if (err) {
		struct sroce_handle_req dreq = { .handle = mw->handle };

		sroce_ucall(mw->uctx, SROCE_OP_DEALLOC_MW, &dreq, sizeof(dreq),
			    NULL, 0, NULL, 0);
		return err;
	}
	sroce_live_inc(SROCE_OBJ_MW);
	return 0;
}

/* A bound window is unbound by sroced first (IBA 11.2.9); a destroy always
 * ends the kernel object, so the daemon's status is not looked at.
 */
int sroce_dealloc_mw(struct ib_mw *ibmw)
{
	struct sroce_mw *mw = to_smw(ibmw);
	struct sroce_handle_req req = { .handle = mw->handle };

	sroce_ucall(mw->uctx, SROCE_OP_DEALLOC_MW, &req, sizeof(req),
		    NULL, 0, NULL, 0);
	sroce_live_dec(SROCE_OBJ_MW);
	return 0;
}
