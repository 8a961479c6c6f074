//go:build !purego

#include "textflag.h"

// The AVX2 GELU of inference: nn.normalCDF (nn/gelu.go), four elements (one double lane
// each) per step, the same operations in the same order, each rounded on its own (no FMA), so
// the same bits.

DATA negrange<>+0(SB)/8, $-10.0
DATA negrange<>+8(SB)/8, $-10.0
DATA negrange<>+16(SB)/8, $-10.0
DATA negrange<>+24(SB)/8, $-10.0
GLOBL negrange<>(SB), RODATA|NOPTR, $32

DATA posrange<>+0(SB)/8, $10.0
DATA posrange<>+8(SB)/8, $10.0
DATA posrange<>+16(SB)/8, $10.0
DATA posrange<>+24(SB)/8, $10.0
GLOBL posrange<>(SB), RODATA|NOPTR, $32

DATA steps<>+0(SB)/8, $32.0
DATA steps<>+8(SB)/8, $32.0
DATA steps<>+16(SB)/8, $32.0
DATA steps<>+24(SB)/8, $32.0
GLOBL steps<>(SB), RODATA|NOPTR, $32

// func GELU(x, y *float32, n int, tab *float64) int
//
// Registers: SI x, DI y, CX n, R8 tab, AX the first element of the group; Y13 -phiRange,
// Y14 phiRange, Y15 phiSteps; R9-R12 the byte offsets of the four lanes' coefficient rows.
TEXT ·GELU(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ tab+24(FP), R8
	VMOVUPD negrange<>(SB), Y13
	VMOVUPD posrange<>(SB), Y14
	VMOVUPD steps<>(SB), Y15
	XORQ AX, AX

loop:
	CMPQ AX, CX
	JGE  done
	VCVTPS2PD (SI)(AX*4), Y0     // xf = float64(x)
	VCMPPD    $0x1e, Y13, Y0, Y1 // xf > -phiRange (false for NaN)
	VCMPPD    $0x11, Y14, Y0, Y2 // xf < phiRange
	VANDPD    Y2, Y1, Y1
	VMOVMSKPD Y1, BX
	CMPQ      BX, $15
	JNE       done               // a lane out of range: the caller does this group

	VADDPD     Y14, Y0, Y3 // u = (xf + phiRange) * phiSteps, in (0, 640)
	VMULPD     Y15, Y3, Y3
	VCVTTPD2DQY Y3, X4     // i = int(u): truncation
	VCVTDQ2PD  X4, Y5
	VSUBPD     Y5, Y3, Y6  // t = u - float64(i)

	// The rows c0..c3 of the four lanes (32 bytes each), transposed into one vector per
	// coefficient.
	VPSLLD  $5, X4, X4
	VMOVD   X4, R9
	VPEXTRD $1, X4, R10
	VPEXTRD $2, X4, R11
	VPEXTRD $3, X4, R12
	VMOVUPD (R8)(R9*1), Y7
	VMOVUPD (R8)(R10*1), Y8
	VMOVUPD (R8)(R11*1), Y9
	VMOVUPD (R8)(R12*1), Y10
	VUNPCKLPD  Y8, Y7, Y1      // r0c0 r1c0 r0c2 r1c2
	VUNPCKHPD  Y8, Y7, Y2      // r0c1 r1c1 r0c3 r1c3
	VUNPCKLPD  Y10, Y9, Y11    // r2c0 r3c0 r2c2 r3c2
	VUNPCKHPD  Y10, Y9, Y12    // r2c1 r3c1 r2c3 r3c3
	VPERM2F128 $0x20, Y11, Y1, Y7  // c0
	VPERM2F128 $0x31, Y11, Y1, Y9  // c2
	VPERM2F128 $0x20, Y12, Y2, Y8  // c1
	VPERM2F128 $0x31, Y12, Y2, Y10 // c3

	// ((c3 t + c2) t + c1) t + c0
	VMULPD Y6, Y10, Y0
	VADDPD Y9, Y0, Y0
	VMULPD Y6, Y0, Y0
	VADDPD Y8, Y0, Y0
	VMULPD Y6, Y0, Y0
	VADDPD Y7, Y0, Y0

	VCVTPD2PSY Y0, X0          // Phi as float32 (round to nearest)
	VMULPS     (SI)(AX*4), X0, X0 // x Phi(x)
	VMOVUPS    X0, (DI)(AX*4)
	ADDQ       $4, AX
	JMP        loop

done:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET
