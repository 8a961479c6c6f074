package nvib

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/nvdp-project/nvdp/nn"
	"github.com/nvdp-project/nvdp/privacy"
)

// BlockConfig configures the NVDP Transformer block.
type BlockConfig struct {
	// Hidden is the block's width P, the latent width of the sample Z it
	// reads: [Config.Latent], which is the encoder's hidden size H unless a
	// latent width is set. Reference mode reads queries from x [B,S,H], so
	// there P = H.
	Hidden int `json:"hidden"`
	Heads  int `json:"heads"` // d_h = Hidden/Heads
	// Intermediate is the FFN width: [Config.BlockIntermediate], the
	// encoder's intermediate size scaled by P/H.
	Intermediate int          `json:"intermediate"`
	LayerNormEps float64      `json:"layer_norm_eps"`
	Dropout      float64      `json:"dropout"` // hidden dropout after W_o and W_2 (reference runs: 0)
	Mode         privacy.Mode `json:"mode"`
}

// Block is the NVDP Transformer block of ref §3.2, whose attention is the
// denoising attention of ref §3.1:
//
//	s_{t,j} = q_t.k_j/sqrt(d_h) + ln pi_j - ||z_j||^2/(2 sqrt(d_h))
//	c_t = sum_j softmax_j(s_{t,j}) v_j,  k_j = W_k z_j + b_k,  v_j = W_v z_j + b_v
//	a_t = LayerNorm_1(W_o c_t + b_o)
//	y_t = LayerNorm_2(W_2 GELU(W_1 a_t + b_1) + b_2 + a_t)
//
// The scores are per head, ||z_j|| runs over all P dimensions, j runs over
// 0..S, and a_t has no residual from x.
//
// In principled mode the queries are q_t = W_q z_t + b_q, from every token
// component of Z, t = 1..S. Padding components are included, since they are
// released like the others. The block output is thus a function of Z and pi
// alone, a post-processing of the sample: see "Queries and post-processing"
// in docs/privacy.md. The block never reads the input's mask or length. The
// key bias is ln pi_j - ||z_j||^2/(2 sqrt d_h); ln pi_j is finite for every
// released component and -Inf where pi_j = 0.
//
// In reference mode the queries are q_t = W_q x_t + b_q, from the raw
// encoder output x, as in ref §10 item 8. The key bias is
// ln(max(pi_j, tiny)) + [pi_j <= 0], with float32-min at pads, as in ref
// §3.1 and §10 item 7.
type Block struct {
	Cfg BlockConfig
	// The layer's parameters are prefix.attention.self.{query,key,value},
	// prefix.attention.output.{dense,LayerNorm}, prefix.intermediate.dense
	// and prefix.output.{dense,LayerNorm}. Queries come from qIn, keys and
	// values from Z, and the attention has no residual.
	*nn.TransformerLayer
	drop nn.Dropout
}

// NewBlock returns a block with the Hugging Face initialisation: weights
// N(0, 0.02^2), zero biases, LayerNorm gain 1 and bias 0.
func NewBlock(prefix string, cfg BlockConfig, rng *rand.Rand) (*Block, error) {
	P, I := cfg.Hidden, cfg.Intermediate
	if P < 1 || cfg.Heads < 1 || P%cfg.Heads != 0 || I < 1 {
		return nil, fmt.Errorf("nvdp block: hidden %d, heads %d, intermediate %d", P, cfg.Heads, I)
	}
	if cfg.Dropout < 0 || cfg.Dropout >= 1 {
		return nil, fmt.Errorf("nvdp block: dropout %v outside [0,1)", cfg.Dropout)
	}
	eps := cfg.LayerNormEps
	if eps <= 0 {
		eps = 1e-12
	}
	b := &Block{Cfg: cfg, TransformerLayer: nn.NewTransformerLayer(prefix+".", P, I, float32(eps)),
		drop: nn.Dropout{P: float32(cfg.Dropout)}}
	b.InitHF(rng, 0.02)
	return b, nil
}

// BlockCache holds what [Block.Backward] needs.
type BlockCache struct {
	B, S, N, P int
	clampedPi  []bool // reference: ln(max(pi,tiny)) clamped (no gradient to pi)
	layer      *nn.TransformerCache
}

const float32Tiny = 1.1754943508222875e-38

// Forward returns the block's output y [B,S,P] for sample s of posterior
// post, and the cache Backward needs.
//
// Z in s has shape [B,N,P]. In principled mode the block reads only post's
// shape and the sample Z and pi, and x may be nil. In reference mode it also
// reads the encoder output x [B,S,P], with P = H, for the queries, and
// post.Mask, the padding mask, for the float32-min bias at pads.
func (b *Block) Forward(x *nn.Tensor, post *Posterior, s *Sample, train bool, rng *rand.Rand) (*nn.Tensor, *BlockCache) {
	B, N, P := post.B, post.N, post.P
	S := N - 1
	c := &BlockCache{B: B, S: S, N: N, P: P}
	qIn := x
	if !b.Cfg.Mode.IsReference() {
		qIn = nn.New(B, S, P)
		for bb := 0; bb < B; bb++ {
			// components 1..S of example bb are contiguous in Z and in qIn
			copy(qIn.Data[bb*S*P:(bb+1)*S*P], s.Z.Data[(bb*N+1)*P:(bb+1)*N*P])
		}
	}
	sq := math.Sqrt(float64(P / b.Cfg.Heads))
	bias := nn.New(B, N)
	c.clampedPi = make([]bool, B*N)
	for k := 0; k < B*N; k++ {
		var nz float64
		for _, v := range s.Z.Data[k*P : (k+1)*P] {
			nz += float64(v) * float64(v)
		}
		l2 := nz / (2 * sq)
		if b.Cfg.Mode.IsReference() {
			pi := s.Dir.Pi[k]
			lp := math.Log(math.Max(float64(pi), float32Tiny))
			if float64(pi) <= float32Tiny {
				c.clampedPi[k] = true
			}
			v := float32(lp - l2)
			if pi <= 0 {
				v += 1 // the released bug: a boolean added instead of -inf
			}
			if post.Mask[k] == 0 {
				v += -math.MaxFloat32
			}
			bias.Data[k] = v
		} else {
			bias.Data[k] = float32(s.Dir.LogPi[k] - l2) // finite: every component is released
		}
	}
	var y *nn.Tensor
	y, c.layer = b.TransformerLayer.Forward(qIn, s.Z, bias, nn.LayerOptions{Heads: b.Cfg.Heads, HiddenDropout: b.drop}, train, rng)
	return y, c
}

// Backward takes dy [B,S,P], accumulates the parameter gradients and returns
// the input gradients.
//
// dZ has shape [B,N,P]. dLogPi [B,N] is the gradient with respect to ln pi;
// it is 0 where pi = 0, that is at reference-mode pads, and in reference
// mode also where pi <= tiny. dx [B,S,P] is nil in principled mode, where
// the block does not read x.
func (b *Block) Backward(c *BlockCache, s *Sample, dy *nn.Tensor) (dZ *nn.Tensor, dLogPi []float64, dx *nn.Tensor) {
	B, S, N, P := c.B, c.S, c.N, c.P
	dqIn, dZ, dBias := b.TransformerLayer.Backward(c.layer, dy)
	sq := math.Sqrt(float64(P / b.Cfg.Heads))
	dLogPi = make([]float64, B*N)
	for k := 0; k < B*N; k++ {
		g := float64(dBias.Data[k])
		if g == 0 || math.IsInf(s.Dir.LogPi[k], -1) {
			continue
		}
		if !c.clampedPi[k] {
			dLogPi[k] = g
		}
		// d(-||z||^2/(2 sqrt dh))/dz = -z/sqrt(dh)
		for j := k * P; j < (k+1)*P; j++ {
			dZ.Data[j] += float32(-g * float64(s.Z.Data[j]) / sq)
		}
	}
	if b.Cfg.Mode.IsReference() {
		return dZ, dLogPi, dqIn
	}
	for bb := 0; bb < B; bb++ {
		// query row t is z_{t+1}: dZ[bb, 1..S] += dqIn[bb, 0..S-1]
		src := dqIn.Data[bb*S*P : (bb+1)*S*P]
		dst := dZ.Data[(bb*N+1)*P : (bb+1)*N*P]
		for j, v := range src {
			dst[j] += v
		}
	}
	return dZ, dLogPi, nil
}
