/* Quota decisions shared by every vendor: reserve or refuse, release, virtualise memory info. */
#include <stdio.h>

#include "vcore.h"

static int limited(const struct vc_vendor *v, int dev)
{
    return v->active && dev >= 0 && dev < VC_MAX_DEV && (v->limit[dev] != 0 || v->fail_closed);
}

/* A device index vcore cannot track while a quota is active: refused, never unlimited. */
static int untrackable(const struct vc_vendor *v, int dev)
{
    return v->active && dev >= VC_MAX_DEV;
}

int vc_charge(struct vc_vendor *v, int dev, uint64_t size)
{
    if (untrackable(v, dev)) {
        vc_log(VC_LOG_WARN, "%s allocation refused on device %d: vcore tracks devices 0-%d only", v->name, dev,
               VC_MAX_DEV - 1);
        return VC_DENIED;
    }
    if (!limited(v, dev))
        return VC_UNTRACKED;
    char req[32], used_s[32], lim[32];
    if (v->fail_closed) {
        vc_fmt_mib(req, sizeof req, size);
        vc_log(VC_LOG_WARN, "%s allocation refused on device %d: request %s MiB: %s", v->name, dev, req,
               v->reason);
        return VC_DENIED;
    }
    uint64_t used = 0;
    int rc = vc_region_reserve(&v->region, dev, size, v->limit[dev], &used);
    if (rc == VC_RESERVED) {
        vc_log(VC_LOG_DEBUG, "%s device %d: reserved %llu bytes, used now %llu", v->name, dev,
               (unsigned long long)size, (unsigned long long)(used + size));
        return VC_CHARGED;
    }
    vc_fmt_mib(req, sizeof req, size);
    if (rc == VC_OVER_QUOTA) {
        vc_fmt_mib(used_s, sizeof used_s, used);
        vc_fmt_mib(lim, sizeof lim, v->limit[dev]);
        vc_log(VC_LOG_WARN, "%s memory quota exceeded on device %d: request %s MiB, used %s MiB, limit %s MiB",
               v->name, dev, req, used_s, lim);
        return VC_DENIED;
    }
    vc_log(VC_LOG_WARN, "%s allocation refused on device %d: request %s MiB: %s", v->name, dev, req,
           v->region.error[0] ? v->region.error : "shared region unusable");
    return VC_DENIED;
}

void vc_uncharge(struct vc_vendor *v, int dev, uint64_t size)
{
    if (dev >= 0 && dev < VC_MAX_DEV)
        vc_region_release(&v->region, dev, size);
}

int vc_virtual_info(struct vc_vendor *v, int dev, uint64_t real_total, uint64_t real_free,
                    uint64_t *total, uint64_t *free_bytes, uint64_t *used_out)
{
    if (!limited(v, dev))
        return 0;
    uint64_t t = v->limit[dev] < real_total ? v->limit[dev] : real_total;
    uint64_t used = t;
    if (v->fail_closed || vc_region_used(&v->region, dev, &used) != 0)
        used = t; /* nothing can be allocated: say so */
    uint64_t f = used < t ? t - used : 0;
    if (f > real_free)
        f = real_free; /* the card itself may be fuller than this container's share */
    *total = t;
    *free_bytes = f;
    if (used_out != NULL)
        *used_out = used < t ? used : t;
    return 1;
}
