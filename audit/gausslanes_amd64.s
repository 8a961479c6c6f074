//go:build !purego

#include "textflag.h"

// The AVX2 Gaussian kernel: gaussVectorsGo (gausslanes.go), four
// dimensions (one lane each) per vector, the same operations in the same
// order, each rounded on its own (no FMA), so the same bits.

// Constants, four lanes each.
DATA radlo<>+0(SB)/8, $0x39b0000000000000  // 2^-100
DATA radlo<>+8(SB)/8, $0x39b0000000000000
DATA radlo<>+16(SB)/8, $0x39b0000000000000
DATA radlo<>+24(SB)/8, $0x39b0000000000000
GLOBL radlo<>(SB), RODATA|NOPTR, $32

DATA radhi<>+0(SB)/8, $0x4630000000000000  // 2^100
DATA radhi<>+8(SB)/8, $0x4630000000000000
DATA radhi<>+16(SB)/8, $0x4630000000000000
DATA radhi<>+24(SB)/8, $0x4630000000000000
GLOBL radhi<>(SB), RODATA|NOPTR, $32

DATA mant<>+0(SB)/8, $0x000fffffffffffff
DATA mant<>+8(SB)/8, $0x000fffffffffffff
DATA mant<>+16(SB)/8, $0x000fffffffffffff
DATA mant<>+24(SB)/8, $0x000fffffffffffff
GLOBL mant<>(SB), RODATA|NOPTR, $32

DATA oneexp<>+0(SB)/8, $0x3ff0000000000000  // 1.0
DATA oneexp<>+8(SB)/8, $0x3ff0000000000000
DATA oneexp<>+16(SB)/8, $0x3ff0000000000000
DATA oneexp<>+24(SB)/8, $0x3ff0000000000000
GLOBL oneexp<>(SB), RODATA|NOPTR, $32

// Registers: SI, DI, R8, R9 mu_a, mu_b, s2_a, s2_b; AX the index of the
// vector's first dimension; CX 4 nvec; Y15 lambda; Y0 q1, Y1 q2, Y2 p1,
// Y3 p2, Y4 e1, Y5 e2; checked kernel: Y6 the least radicand, Y14 the
// greatest; Y7-Y13 temporaries.

// STEP adds the vector at byte offset off past dimension AX to the lanes:
// d = a - b; r1 = y + lam (x - y); r2 = x - lam (x - y);
// t = d d / (r1 r2); q1 += t r2; q2 += t r1; p1 *= r1; p2 *= r2.
#define STEP(off) \
	VMOVUPD off(SI)(AX*8), Y7; \
	VSUBPD off(DI)(AX*8), Y7, Y7; \
	VMULPD Y7, Y7, Y7; \
	VMOVUPD off(R8)(AX*8), Y8; \
	VMOVUPD off(R9)(AX*8), Y9; \
	VSUBPD Y9, Y8, Y10; \
	VMULPD Y15, Y10, Y10; \
	VSUBPD Y10, Y8, Y11; \
	VADDPD Y9, Y10, Y10; \
	VMULPD Y11, Y10, Y12; \
	VDIVPD Y12, Y7, Y12; \
	VMULPD Y12, Y11, Y13; \
	VADDPD Y13, Y0, Y0; \
	VMULPD Y12, Y10, Y13; \
	VADDPD Y13, Y1, Y1; \
	VMULPD Y10, Y2, Y2; \
	VMULPD Y11, Y3, Y3

// RANGE folds r1 (Y10) and r2 (Y11) into the least and greatest radicand.
// A NaN radicand is skipped here (VMINPD/VMAXPD return their second source,
// the running value) but makes q1 or q2 NaN, which the end checks.
#define RANGE \
	VMINPD Y6, Y10, Y6; \
	VMINPD Y6, Y11, Y6; \
	VMAXPD Y14, Y10, Y14; \
	VMAXPD Y14, Y11, Y14

// PEEL: e += bits >> 52; p = its mantissa in [1, 2).
#define PEEL \
	VPSRLQ $52, Y2, Y12; \
	VPADDQ Y12, Y4, Y4; \
	VPAND mant<>(SB), Y2, Y2; \
	VPOR oneexp<>(SB), Y2, Y2; \
	VPSRLQ $52, Y3, Y12; \
	VPADDQ Y12, Y5, Y5; \
	VPAND mant<>(SB), Y3, Y3; \
	VPOR oneexp<>(SB), Y3, Y3

#define PROLOGUE \
	MOVQ ma+8(FP), SI; \
	MOVQ mb+16(FP), DI; \
	MOVQ sa+24(FP), R8; \
	MOVQ sb+32(FP), R9; \
	MOVQ nvec+40(FP), CX; \
	SHLQ $2, CX; \
	MOVQ st+48(FP), DX; \
	VBROADCASTSD lam+0(FP), Y15; \
	VXORPD Y0, Y0, Y0; \
	VXORPD Y1, Y1, Y1; \
	VMOVUPD oneexp<>(SB), Y2; \
	VMOVUPD oneexp<>(SB), Y3; \
	VPXOR Y4, Y4, Y4; \
	VPXOR Y5, Y5, Y5; \
	XORQ AX, AX

#define STORE \
	VMOVUPD Y0, 0(DX); \
	VMOVUPD Y1, 32(DX); \
	VMOVUPD Y2, 64(DX); \
	VMOVUPD Y3, 96(DX); \
	VMOVDQU Y4, 128(DX); \
	VMOVDQU Y5, 160(DX)

// func gaussVectorsAVX2(lam float64, ma, mb, sa, sb *float64, nvec int, st *lanes) bool
//
// The checked kernel: false if a radicand is outside [2^-100, 2^100) or NaN.
TEXT ·gaussVectorsAVX2(SB), NOSPLIT, $0-57
	PROLOGUE
	VMOVUPD radhi<>(SB), Y6
	VXORPD Y14, Y14, Y14
	MOVQ CX, BX
	ANDQ $-32, BX            // dimensions in whole groups of 8 vectors

cgroup:
	CMPQ AX, BX
	JGE cone
	STEP(0)
	RANGE
	STEP(32)
	RANGE
	STEP(64)
	RANGE
	STEP(96)
	RANGE
	STEP(128)
	RANGE
	STEP(160)
	RANGE
	STEP(192)
	RANGE
	STEP(224)
	RANGE
	PEEL
	ADDQ $32, AX
	JMP cgroup

cone:
	CMPQ AX, CX
	JGE cdone
	STEP(0)
	RANGE
	ADDQ $4, AX
	JMP cone

cdone:
	STORE
	VCMPPD $0x19, radlo<>(SB), Y6, Y12   // !(least >= 2^-100)
	VCMPPD $0x15, radhi<>(SB), Y14, Y13  // !(greatest < 2^100)
	VORPD Y12, Y13, Y13
	VCMPPD $0x03, Y0, Y0, Y12            // q1 NaN
	VORPD Y12, Y13, Y13
	VCMPPD $0x03, Y1, Y1, Y12            // q2 NaN
	VORPD Y12, Y13, Y13
	VMOVMSKPD Y13, AX
	TESTL AX, AX
	SETEQ ret+56(FP)
	VZEROUPPER
	RET

// func gaussVectorsAVX2Unchecked(lam float64, ma, mb, sa, sb *float64, nvec int, st *lanes)
//
// The same sums without the range check, for the callers that have proved
// every radicand in range (gaussLanes: inRange).
TEXT ·gaussVectorsAVX2Unchecked(SB), NOSPLIT, $0-56
	PROLOGUE
	MOVQ CX, BX
	ANDQ $-32, BX

ugroup:
	CMPQ AX, BX
	JGE uone
	STEP(0)
	STEP(32)
	STEP(64)
	STEP(96)
	STEP(128)
	STEP(160)
	STEP(192)
	STEP(224)
	PEEL
	ADDQ $32, AX
	JMP ugroup

uone:
	CMPQ AX, CX
	JGE udone
	STEP(0)
	ADDQ $4, AX
	JMP uone

udone:
	STORE
	VZEROUPPER
	RET
