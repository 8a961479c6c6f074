//go:build !purego

#include "textflag.h"

// The softmax's exponentials: nn.Expf (nn/mathf.go) of s - mx, eight elements (float32 lanes) per
// step, the same operations in the same order, each rounded on its own (no FMA), so the same bits.

// Constants, eight lanes each: Expf's float32 constants as bits, and its int32 exponent bounds.
DATA elog2e<>+0(SB)/4, $0x3fb8aa3b // float32(log2e)
DATA elog2e<>+4(SB)/4, $0x3fb8aa3b
DATA elog2e<>+8(SB)/4, $0x3fb8aa3b
DATA elog2e<>+12(SB)/4, $0x3fb8aa3b
DATA elog2e<>+16(SB)/4, $0x3fb8aa3b
DATA elog2e<>+20(SB)/4, $0x3fb8aa3b
DATA elog2e<>+24(SB)/4, $0x3fb8aa3b
DATA elog2e<>+28(SB)/4, $0x3fb8aa3b
GLOBL elog2e<>(SB), RODATA|NOPTR, $32

DATA ehalf<>+0(SB)/4, $0x3f000000 // 0.5
DATA ehalf<>+4(SB)/4, $0x3f000000
DATA ehalf<>+8(SB)/4, $0x3f000000
DATA ehalf<>+12(SB)/4, $0x3f000000
DATA ehalf<>+16(SB)/4, $0x3f000000
DATA ehalf<>+20(SB)/4, $0x3f000000
DATA ehalf<>+24(SB)/4, $0x3f000000
DATA ehalf<>+28(SB)/4, $0x3f000000
GLOBL ehalf<>(SB), RODATA|NOPTR, $32

DATA ec1<>+0(SB)/4, $0x3f318000 // c1
DATA ec1<>+4(SB)/4, $0x3f318000
DATA ec1<>+8(SB)/4, $0x3f318000
DATA ec1<>+12(SB)/4, $0x3f318000
DATA ec1<>+16(SB)/4, $0x3f318000
DATA ec1<>+20(SB)/4, $0x3f318000
DATA ec1<>+24(SB)/4, $0x3f318000
DATA ec1<>+28(SB)/4, $0x3f318000
GLOBL ec1<>(SB), RODATA|NOPTR, $32

DATA ec2<>+0(SB)/4, $0xb95e8083 // c2
DATA ec2<>+4(SB)/4, $0xb95e8083
DATA ec2<>+8(SB)/4, $0xb95e8083
DATA ec2<>+12(SB)/4, $0xb95e8083
DATA ec2<>+16(SB)/4, $0xb95e8083
DATA ec2<>+20(SB)/4, $0xb95e8083
DATA ec2<>+24(SB)/4, $0xb95e8083
DATA ec2<>+28(SB)/4, $0xb95e8083
GLOBL ec2<>(SB), RODATA|NOPTR, $32

DATA ek5<>+0(SB)/4, $0x39506967
DATA ek5<>+4(SB)/4, $0x39506967
DATA ek5<>+8(SB)/4, $0x39506967
DATA ek5<>+12(SB)/4, $0x39506967
DATA ek5<>+16(SB)/4, $0x39506967
DATA ek5<>+20(SB)/4, $0x39506967
DATA ek5<>+24(SB)/4, $0x39506967
DATA ek5<>+28(SB)/4, $0x39506967
GLOBL ek5<>(SB), RODATA|NOPTR, $32

DATA ek4<>+0(SB)/4, $0x3ab743ce
DATA ek4<>+4(SB)/4, $0x3ab743ce
DATA ek4<>+8(SB)/4, $0x3ab743ce
DATA ek4<>+12(SB)/4, $0x3ab743ce
DATA ek4<>+16(SB)/4, $0x3ab743ce
DATA ek4<>+20(SB)/4, $0x3ab743ce
DATA ek4<>+24(SB)/4, $0x3ab743ce
DATA ek4<>+28(SB)/4, $0x3ab743ce
GLOBL ek4<>(SB), RODATA|NOPTR, $32

DATA ek3<>+0(SB)/4, $0x3c088908
DATA ek3<>+4(SB)/4, $0x3c088908
DATA ek3<>+8(SB)/4, $0x3c088908
DATA ek3<>+12(SB)/4, $0x3c088908
DATA ek3<>+16(SB)/4, $0x3c088908
DATA ek3<>+20(SB)/4, $0x3c088908
DATA ek3<>+24(SB)/4, $0x3c088908
DATA ek3<>+28(SB)/4, $0x3c088908
GLOBL ek3<>(SB), RODATA|NOPTR, $32

DATA ek2<>+0(SB)/4, $0x3d2aa9c1
DATA ek2<>+4(SB)/4, $0x3d2aa9c1
DATA ek2<>+8(SB)/4, $0x3d2aa9c1
DATA ek2<>+12(SB)/4, $0x3d2aa9c1
DATA ek2<>+16(SB)/4, $0x3d2aa9c1
DATA ek2<>+20(SB)/4, $0x3d2aa9c1
DATA ek2<>+24(SB)/4, $0x3d2aa9c1
DATA ek2<>+28(SB)/4, $0x3d2aa9c1
GLOBL ek2<>(SB), RODATA|NOPTR, $32

DATA ek1<>+0(SB)/4, $0x3e2aaaaa
DATA ek1<>+4(SB)/4, $0x3e2aaaaa
DATA ek1<>+8(SB)/4, $0x3e2aaaaa
DATA ek1<>+12(SB)/4, $0x3e2aaaaa
DATA ek1<>+16(SB)/4, $0x3e2aaaaa
DATA ek1<>+20(SB)/4, $0x3e2aaaaa
DATA ek1<>+24(SB)/4, $0x3e2aaaaa
DATA ek1<>+28(SB)/4, $0x3e2aaaaa
GLOBL ek1<>(SB), RODATA|NOPTR, $32

DATA ek0<>+0(SB)/4, $0x3f000000
DATA ek0<>+4(SB)/4, $0x3f000000
DATA ek0<>+8(SB)/4, $0x3f000000
DATA ek0<>+12(SB)/4, $0x3f000000
DATA ek0<>+16(SB)/4, $0x3f000000
DATA ek0<>+20(SB)/4, $0x3f000000
DATA ek0<>+24(SB)/4, $0x3f000000
DATA ek0<>+28(SB)/4, $0x3f000000
GLOBL ek0<>(SB), RODATA|NOPTR, $32

DATA elo<>+0(SB)/4, $0xc2aeac4f // -87.33654
DATA elo<>+4(SB)/4, $0xc2aeac4f
DATA elo<>+8(SB)/4, $0xc2aeac4f
DATA elo<>+12(SB)/4, $0xc2aeac4f
DATA elo<>+16(SB)/4, $0xc2aeac4f
DATA elo<>+20(SB)/4, $0xc2aeac4f
DATA elo<>+24(SB)/4, $0xc2aeac4f
DATA elo<>+28(SB)/4, $0xc2aeac4f
GLOBL elo<>(SB), RODATA|NOPTR, $32

DATA ehi<>+0(SB)/4, $0x42b17217 // 88.72283
DATA ehi<>+4(SB)/4, $0x42b17217
DATA ehi<>+8(SB)/4, $0x42b17217
DATA ehi<>+12(SB)/4, $0x42b17217
DATA ehi<>+16(SB)/4, $0x42b17217
DATA ehi<>+20(SB)/4, $0x42b17217
DATA ehi<>+24(SB)/4, $0x42b17217
DATA ehi<>+28(SB)/4, $0x42b17217
GLOBL ehi<>(SB), RODATA|NOPTR, $32

DATA eone<>+0(SB)/4, $0x3f800000 // 1
DATA eone<>+4(SB)/4, $0x3f800000
DATA eone<>+8(SB)/4, $0x3f800000
DATA eone<>+12(SB)/4, $0x3f800000
DATA eone<>+16(SB)/4, $0x3f800000
DATA eone<>+20(SB)/4, $0x3f800000
DATA eone<>+24(SB)/4, $0x3f800000
DATA eone<>+28(SB)/4, $0x3f800000
GLOBL eone<>(SB), RODATA|NOPTR, $32

DATA enlo<>+0(SB)/4, $0xffffff83 // int32 -125
DATA enlo<>+4(SB)/4, $0xffffff83
DATA enlo<>+8(SB)/4, $0xffffff83
DATA enlo<>+12(SB)/4, $0xffffff83
DATA enlo<>+16(SB)/4, $0xffffff83
DATA enlo<>+20(SB)/4, $0xffffff83
DATA enlo<>+24(SB)/4, $0xffffff83
DATA enlo<>+28(SB)/4, $0xffffff83
GLOBL enlo<>(SB), RODATA|NOPTR, $32

DATA enhi<>+0(SB)/4, $0x0000007f // int32 127
DATA enhi<>+4(SB)/4, $0x0000007f
DATA enhi<>+8(SB)/4, $0x0000007f
DATA enhi<>+12(SB)/4, $0x0000007f
DATA enhi<>+16(SB)/4, $0x0000007f
DATA enhi<>+20(SB)/4, $0x0000007f
DATA enhi<>+24(SB)/4, $0x0000007f
DATA enhi<>+28(SB)/4, $0x0000007f
GLOBL enhi<>(SB), RODATA|NOPTR, $32

DATA ebias<>+0(SB)/4, $0x0000007f // int32 127
DATA ebias<>+4(SB)/4, $0x0000007f
DATA ebias<>+8(SB)/4, $0x0000007f
DATA ebias<>+12(SB)/4, $0x0000007f
DATA ebias<>+16(SB)/4, $0x0000007f
DATA ebias<>+20(SB)/4, $0x0000007f
DATA ebias<>+24(SB)/4, $0x0000007f
DATA ebias<>+28(SB)/4, $0x0000007f
GLOBL ebias<>(SB), RODATA|NOPTR, $32

// func ExpShifted(s *float32, n int, mx float32) int
//
// Registers: SI s, CX n, AX the first element of the group, Y15 mx in every lane; Y0 x = s - mx,
// Y1 the lanes that send the group back to Go, Y3 the lanes below -87.33654 (result 0), Y5 the
// exponent n, Y6 z = float32(n), Y7 r, Y8 r^2, Y9 the polynomial and the result.
TEXT ·ExpShifted(SB), NOSPLIT, $0-32
	MOVQ         s+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS mx+16(FP), Y15
	XORQ         AX, AX

loop:
	CMPQ   AX, CX
	JGE    done
	VMOVUPS (SI)(AX*4), Y0
	VSUBPS  Y15, Y0, Y0               // x = s - mx
	VCMPPS  $0x03, Y0, Y0, Y1         // x NaN
	VCMPPS  $0x1e, ehi<>(SB), Y0, Y2  // x > 88.72283
	VORPS   Y2, Y1, Y1
	VCMPPS  $0x11, elo<>(SB), Y0, Y3  // x < -87.33654: 0

	// n = floor(x log2e + 1/2): truncation, less one where fn < 0 is not an integer
	VMULPS     elog2e<>(SB), Y0, Y4
	VADDPS     ehalf<>(SB), Y4, Y4    // fn
	VCVTTPS2DQ Y4, Y5
	VCVTDQ2PS  Y5, Y6
	VXORPS     Y7, Y7, Y7
	VCMPPS     $0x11, Y7, Y4, Y8      // fn < 0
	VCMPPS     $0x0c, Y4, Y6, Y9      // float32(n) != fn
	VANDPS     Y9, Y8, Y8
	VPADDD     Y8, Y5, Y5             // n-- (the mask is -1)

	// Expf's rare paths, n < -125 or n > 127, outside the lanes that give 0, go back to Go.
	VMOVDQU  enlo<>(SB), Y10
	VPCMPGTD Y5, Y10, Y10             // -125 > n
	VPCMPGTD enhi<>(SB), Y5, Y11      // n > 127
	VORPS    Y11, Y10, Y10
	VANDNPS  Y10, Y3, Y10             // not a 0 lane
	VORPS    Y10, Y1, Y1
	VMOVMSKPS Y1, BX
	TESTL    BX, BX
	JNE      done

	// r = x - z c1 - z c2; y = p(r) r^2 + r + 1
	VCVTDQ2PS Y5, Y6                  // z
	VMULPS    ec1<>(SB), Y6, Y7
	VSUBPS    Y7, Y0, Y7
	VMULPS    ec2<>(SB), Y6, Y8
	VSUBPS    Y8, Y7, Y7              // r
	VMULPS    Y7, Y7, Y8              // r^2
	VMULPS    ek5<>(SB), Y7, Y9
	VADDPS    ek4<>(SB), Y9, Y9
	VMULPS    Y7, Y9, Y9
	VADDPS    ek3<>(SB), Y9, Y9
	VMULPS    Y7, Y9, Y9
	VADDPS    ek2<>(SB), Y9, Y9
	VMULPS    Y7, Y9, Y9
	VADDPS    ek1<>(SB), Y9, Y9
	VMULPS    Y7, Y9, Y9
	VADDPS    ek0<>(SB), Y9, Y9       // p
	VMULPS    Y8, Y9, Y9
	VADDPS    Y7, Y9, Y9
	VADDPS    eone<>(SB), Y9, Y9      // y

	// y 2^n, 2^n as the bits (n + 127) << 23; the 0 lanes cleared
	VPADDD  ebias<>(SB), Y5, Y5
	VPSLLD  $23, Y5, Y5
	VMULPS  Y5, Y9, Y9
	VANDNPS Y9, Y3, Y9
	VMOVUPS Y9, (SI)(AX*4)
	ADDQ    $8, AX
	JMP     loop

done:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
