package dnn

import (
	"encoding/binary"
	"errors"

	"github.com/nvdp-project/nvdp/internal/rngstream"
)

// Philox is the counter-based generator of the device's training draws, for dropout. It is
// Philox4x32-10 of Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC'11, which is Random123's philox4x32_R with R = 10. The kernels of kernels/dropout.cu and the
// host compute it bit for bit the same.
//
// The stream of a key is a sequence of 64-bit draws. Draw m is half m&1 of the Philox4x32-10 block
// of counter (uint32(m>>1), uint32(m>>33), 0, 0) under the key (uint32(Key), uint32(Key>>32)):
// words 0 and 1 for the first half and 2 and 3 for the second, the first word being the low 32
// bits.
//
// Pos is the number of draws consumed. A device layer reads the draws from Pos on and advances Pos
// by as many as it consumed, the counter offset of each call, so that successive calls never reuse
// a draw; each layer documents its count.
//
// Philox is also a math/rand/v2 Source: Uint64 returns draw Pos and advances it. The device layers
// consume draws exactly as their nn twins consume a *rand.Rand's Uint64s: [Dropout] takes one draw
// per 4 elements, from the low 16-bit chunk up, and attention dropout one draw per probability, as
// rand.Float32. An nn layer given rand.New(p) for a copy p of the device's Philox thus draws the
// same keep masks as its device twin: the same dropout on both devices from one seed, with nothing
// transferred.
//
// The key of a training run is that of rngstream.TrainSampleDevice; see [NewPhiloxStream]. The
// state is the two words Key and Pos, which MarshalBinary encodes for checkpoints. A Philox is not
// safe for concurrent use, since Draw caches the last block.
type Philox struct {
	Key uint64 // the key: k0 = low 32 bits, k1 = high 32 bits
	Pos uint64 // draws consumed

	// the last block computed on the host, for Uint64
	blk   uint64
	out   [4]uint32
	valid bool
}

// NewPhilox returns the stream of key from its first draw.
func NewPhilox(key uint64) *Philox { return &Philox{Key: key} }

// NewPhiloxStream returns the Philox stream keyed by instance i of the named stream s for a run's
// seed, as [rngstream.Stream.Key] gives it. A training run uses
// NewPhiloxStream(rngstream.TrainSampleDevice, seed, 0).
func NewPhiloxStream(s rngstream.Stream, seed uint64, i int) *Philox {
	return NewPhilox(s.Key(seed, i))
}

// Philox4x32 round constants: Random123's PHILOX_M4x32_0/1 and PHILOX_W32_0/1.
const (
	philoxM0 = 0xD2511F53
	philoxM1 = 0xCD9E8D57
	philoxW0 = 0x9E3779B9
	philoxW1 = 0xBB67AE85
)

// philoxBlock returns the Philox4x32-10 bijection of the counter ctr under key, as the kernels'
// philox4x32_10 computes it.
func philoxBlock(ctr [4]uint32, key [2]uint32) [4]uint32 {
	c := ctr
	k0, k1 := key[0], key[1]
	for r := 0; r < 10; r++ {
		if r > 0 {
			k0 += philoxW0
			k1 += philoxW1
		}
		p0 := uint64(philoxM0) * uint64(c[0])
		p1 := uint64(philoxM1) * uint64(c[2])
		c = [4]uint32{uint32(p1>>32) ^ c[1] ^ k0, uint32(p1), uint32(p0>>32) ^ c[3] ^ k1, uint32(p0)}
	}
	return c
}

// keys returns the two 32-bit key words.
func (p *Philox) keys() (uint32, uint32) { return uint32(p.Key), uint32(p.Key >> 32) }

// Draw returns draw m of the stream without moving Pos.
func (p *Philox) Draw(m uint64) uint64 {
	blk := m >> 1
	if !p.valid || p.blk != blk {
		k0, k1 := p.keys()
		p.out = philoxBlock([4]uint32{uint32(blk), uint32(blk >> 32), 0, 0}, [2]uint32{k0, k1})
		p.blk, p.valid = blk, true
	}
	h := 2 * (m & 1)
	return uint64(p.out[h]) | uint64(p.out[h+1])<<32
}

// Uint64 returns draw Pos and advances Pos, as math/rand/v2's Source.
func (p *Philox) Uint64() uint64 {
	v := p.Draw(p.Pos)
	p.Pos++
	return v
}

// take reserves the next n draws for a device call: it returns the first
// one's index and advances Pos by n.
func (p *Philox) take(n int) int64 {
	if p == nil {
		panic("dnn: dropout in training needs a *Philox")
	}
	pos := p.Pos
	p.Pos += uint64(n)
	return int64(pos)
}

// philoxMagic starts a marshalled Philox state.
const philoxMagic = "philox4x32-10:"

// MarshalBinary returns the state, key and position, for [nn.RNGState].
func (p *Philox) MarshalBinary() ([]byte, error) {
	b := append([]byte(philoxMagic), make([]byte, 16)...)
	binary.LittleEndian.PutUint64(b[len(philoxMagic):], p.Key)
	binary.LittleEndian.PutUint64(b[len(philoxMagic)+8:], p.Pos)
	return b, nil
}

// UnmarshalBinary restores a state of MarshalBinary, for [nn.RestoreRNG]. It returns an error for
// data that is not such a state.
func (p *Philox) UnmarshalBinary(b []byte) error {
	if len(b) != len(philoxMagic)+16 || string(b[:len(philoxMagic)]) != philoxMagic {
		return errors.New("dnn: not a Philox state")
	}
	*p = Philox{Key: binary.LittleEndian.Uint64(b[len(philoxMagic):]), Pos: binary.LittleEndian.Uint64(b[len(philoxMagic)+8:])}
	return nil
}
