/* The AEE error codes FastRPC, the SDK and the DSP return, declared from the public SDK API. Codes raised on
 * the DSP carry AEE_EOFFSET (0x80000400); the host library's codes are bare.
 * For hexbuild's DSP runtime and kernel check, and the test suite's toolchain double (its SDK). */
#ifndef AEESTDERR_H
#define AEESTDERR_H

#if defined(__hexagon__)
#define AEE_EOFFSET 0x80000400
#else
#define AEE_EOFFSET 0x00000000
#endif
#define DSP_AEE_EOFFSET 0x80000400

#define AEE_SUCCESS 0
#define AEE_EUNKNOWN -1
#define AEE_EFAILED                (AEE_EOFFSET + 0x001)
#define AEE_ENOMEMORY              (AEE_EOFFSET + 0x002)
#define AEE_ECLASSNOTSUPPORT       (AEE_EOFFSET + 0x003)
#define AEE_EVERSIONNOTSUPPORT     (AEE_EOFFSET + 0x004)
#define AEE_EALREADYLOADED         (AEE_EOFFSET + 0x005)
#define AEE_EUNABLETOLOAD          (AEE_EOFFSET + 0x006)
#define AEE_EUNABLETOUNLOAD        (AEE_EOFFSET + 0x007)
#define AEE_EALARMPENDING          (AEE_EOFFSET + 0x008)
#define AEE_EINVALIDTIME           (AEE_EOFFSET + 0x009)
#define AEE_EBADCLASS              (AEE_EOFFSET + 0x00A)
#define AEE_EBADMETRIC             (AEE_EOFFSET + 0x00B)
#define AEE_EEXPIRED               (AEE_EOFFSET + 0x00C)
#define AEE_EBADSTATE              (AEE_EOFFSET + 0x00D)
#define AEE_EBADPARM               (AEE_EOFFSET + 0x00E)
#define AEE_ESCHEMENOTSUPPORTED    (AEE_EOFFSET + 0x00F)
#define AEE_EBADITEM               (AEE_EOFFSET + 0x010)
#define AEE_EINVALIDFORMAT         (AEE_EOFFSET + 0x011)
#define AEE_EINCOMPLETEITEM        (AEE_EOFFSET + 0x012)
#define AEE_ENOPERSISTMEMORY       (AEE_EOFFSET + 0x013)
#define AEE_EUNSUPPORTED           (AEE_EOFFSET + 0x014)
#define AEE_EPRIVLEVEL             (AEE_EOFFSET + 0x015)
#define AEE_ERESOURCENOTFOUND      (AEE_EOFFSET + 0x016)
#define AEE_EREENTERED             (AEE_EOFFSET + 0x017)
#define AEE_EBADTASK               (AEE_EOFFSET + 0x018)
#define AEE_EALLOCATED             (AEE_EOFFSET + 0x019)
#define AEE_EALREADY               (AEE_EOFFSET + 0x01A)
#define AEE_EMEMPTR                (AEE_EOFFSET + 0x01D)
#define AEE_EHEAP                  (AEE_EOFFSET + 0x01E)
#define AEE_EIDLE                  (AEE_EOFFSET + 0x01F)
#define AEE_EITEMBUSY              (AEE_EOFFSET + 0x020)
#define AEE_ENEEDMORE              (AEE_EOFFSET + 0x023)
#define AEE_EBUFFERTOOSMALL        (AEE_EOFFSET + 0x026)
#define AEE_ENOTOWNER              (AEE_EOFFSET + 0x029)
#define AEE_EINVALIDITEM           (AEE_EOFFSET + 0x02A)
#define AEE_ENOTALLOWED            (AEE_EOFFSET + 0x02B)
#define AEE_EBADHANDLE             (AEE_EOFFSET + 0x02C)
#define AEE_EINVHANDLE             (AEE_EOFFSET + 0x02C)
#define AEE_EOUTOFHANDLES          (AEE_EOFFSET + 0x02D)
#define AEE_ENOMORE                (AEE_EOFFSET + 0x02F)
#define AEE_ECPUEXCEPTION          (AEE_EOFFSET + 0x030)
#define AEE_EREADONLY              (AEE_EOFFSET + 0x031)
#define AEE_EINVALIDDOMAIN         (AEE_EOFFSET + 0x039)
#define AEE_EINVALIDFD             (AEE_EOFFSET + 0x03A)
#define AEE_EINVALIDDEVICE         (AEE_EOFFSET + 0x03B)
#define AEE_ENOSUCHMOD             (AEE_EOFFSET + 0x03E)
#define AEE_ENOSUCHSYMBOL          (AEE_EOFFSET + 0x042)
#define AEE_ENOSUCHDEVICE          (AEE_EOFFSET + 0x043)
#define AEE_ENOSUCHFILE            (AEE_EOFFSET + 0x045)
#define AEE_ENOSUCHMAP             (AEE_EOFFSET + 0x048)
#define AEE_EBADSIZE               (AEE_EOFFSET + 0x04D)
#define AEE_EBADFD                 (AEE_EOFFSET + 0x04F)
#define AEE_EIOCTL                 (AEE_EOFFSET + 0x056)
#define AEE_EFOPEN                 (AEE_EOFFSET + 0x057)
#define AEE_EMMAP                  (AEE_EOFFSET + 0x065)
#define AEE_ENORPCMEMORY           (AEE_EOFFSET + 0x068)
#define AEE_ENOTINITIALIZED        (AEE_EOFFSET + 0x06B)
#define AEE_EUNSUPPORTEDAPI        (AEE_EOFFSET + 0x06C)
#define AEE_EINVARGS               (AEE_EOFFSET + 0x071)
#define AEE_ECONNREFUSED           (AEE_EOFFSET + 0x072)
#define AEE_EUNSIGNEDMOD           (AEE_EOFFSET + 0x081)
#define AEE_EBADVA                 (AEE_EOFFSET + 0x083)
#define AEE_EQURTTHREADCREATE      (AEE_EOFFSET + 0x14B)
#define AEE_ERPC                   (AEE_EOFFSET + 0x200)
#define AEE_EFILE                  (AEE_EOFFSET + 0x201)

/* Same value on both sides. */
#define AEE_ENOSUCH      39
#define AEE_EINTERRUPTED 46
#define AEE_ECONNRESET   104
#define AEE_EWOULDBLOCK  516

#endif /* AEESTDERR_H */
