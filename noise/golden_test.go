package noise

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// countingSource counts the Uint64 calls made on a source.
type countingSource struct {
	src   rand.Source
	calls int
}

func (c *countingSource) Uint64() uint64 { c.calls++; return c.src.Uint64() }

// goldenLattices are the lattices of TestNoiseGolden: sigma' from NoiseSigma of a few
// log-variances, with bounds that give a = 1 (sigma' a power of two) and an odd a > 1, and
// t = log2(sigma'/G) - log2(a) large (a small bound) and small or negative (a large bound).
var goldenLattices = []struct {
	sigma, bound float64
}{
	{NoiseSigma(0), 0.493},   // the main job: a = 1, t = 18
	{NoiseSigma(0), 500_000}, // a = 1, t = 5
	{NoiseSigma(-1), 0.5},    // a odd (21 bits), t = -2
	{NoiseSigma(-1), 30_000}, // a odd, t = -12 (a few dozen steps per sigma)
	{NoiseSigma(2.3), 7},     // a odd (24 bits), sigma' > 1, t = -5
	{NoiseSigma(-9.5), 1e-3}, // a odd, sigma' small, t = -5
	{0.75, 1000},             // a = 3, t = 10
}

// goldenSource is one seeded generator of TestNoiseGolden.
type goldenSource struct {
	name string
	make func() rand.Source
}

var goldenSources = []goldenSource{
	{"chacha8-1", func() rand.Source { return rand.NewChaCha8([32]byte{1}) }},
	{"chacha8-2", func() rand.Source { return rand.NewChaCha8([32]byte{2, 7, 1, 8}) }},
	{"chacha8-3", func() rand.Source { return rand.NewChaCha8([32]byte{31: 0xff}) }},
	{"pcg-1", func() rand.Source { return rand.NewPCG(1, 2) }},
	{"pcg-2", func() rand.Source { return rand.NewPCG(0x9e3779b97f4a7c15, 3) }},
	{"pcg-3", func() rand.Source { return rand.NewPCG(42, 0) }},
}

// goldenDraws is how many values each golden case draws (goldenShort with -short).
const goldenDraws, goldenShort = 200_000, 10_000

// golden pins, for each lattice and source, the first values, the SHA-256 of the first
// goldenShort and goldenDraws values (int64 little-endian) and the number of Uint64 calls made
// by then. The values were computed with the sampler of commit 5da32a1.
type golden struct {
	first                []int64
	shortSum, sum        string
	shortCalls, allCalls int
}

// goldenDraw draws n values from s the way a caller may: Fill of chunks of 777 values
// alternating with 223 calls of Draw, so that both paths are pinned.
func goldenDraw(s *Noise, n int) []int64 {
	out := make([]int64, n)
	for i := 0; i < n; {
		j := min(n, i+777)
		s.Fill(out[i:j])
		i = j
		for ; i < n && i < j+223; i++ {
			out[i] = s.Draw()
		}
	}
	return out
}

func sumOf(v []int64) string {
	h := sha256.New()
	var b [8]byte
	for _, x := range v {
		binary.LittleEndian.PutUint64(b[:], uint64(x))
		h.Write(b[:])
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// TestNoiseGolden pins the sampler's output bit for bit: for every lattice and seeded source,
// the values drawn and the number of Uint64 calls made on the source are those of the sampler
// at commit 5da32a1, drawn through a counting wrapper (a plain rand.Source), from the bare
// source and from the source behind a *rand.Rand (where the sampler takes a path of its own for
// the concrete type), whose next output must then be the one after as many calls. Any change to which bits a draw uses, or in what
// order, fails it.
func TestNoiseGolden(t *testing.T) {
	n := goldenDraws
	if testing.Short() {
		n = goldenShort
	}
	var table []string
	for li, gl := range goldenLattices {
		l, err := NewLattice(gl.sigma, gl.bound)
		if err != nil {
			t.Fatalf("lattice %d: %v", li, err)
		}
		for si, gs := range goldenSources {
			var want golden
			if k := li*len(goldenSources) + si; k < len(goldenWant) {
				want = goldenWant[k]
			}
			name := fmt.Sprintf("sigma=%v,bound=%v,a=%d,t=%d/%s", gl.sigma, gl.bound, l.a, l.t, gs.name)
			var got golden
			t.Run(name, func(t *testing.T) {
				cs := &countingSource{src: gs.make()}
				s := NewNoise(l, cs)
				v := goldenDraw(s, goldenShort)
				got.first = v[:4]
				got.shortSum, got.shortCalls = sumOf(v), cs.calls
				if n > goldenShort {
					v = append(v, goldenDraw(s, n-goldenShort)...)
					got.sum, got.allCalls = sumOf(v), cs.calls
				}
				table = append(table, fmt.Sprintf("{%#v, %q, %q, %d, %d},", got.first, got.shortSum, got.sum, got.shortCalls, got.allCalls))
				if fmt.Sprint(got.first) != fmt.Sprint(want.first) {
					t.Errorf("first values %v, want %v", got.first, want.first)
				}
				if got.shortSum != want.shortSum || got.shortCalls != want.shortCalls {
					t.Errorf("first %d values: sha256 %s after %d Uint64 calls, want %s after %d", goldenShort, got.shortSum, got.shortCalls, want.shortSum, want.shortCalls)
				}
				if n > goldenShort && (got.sum != want.sum || got.allCalls != want.allCalls) {
					t.Errorf("%d values: sha256 %s after %d Uint64 calls, want %s after %d", n, got.sum, got.allCalls, want.sum, want.allCalls)
				}

				// the bare source, and the source behind a *rand.Rand (as package release
				// hands it): the same values, and the source advanced by as many calls
				for _, inRand := range []bool{false, true} {
					src := gs.make()
					var nz *Noise
					if inRand {
						nz = NewNoise(l, rand.New(src))
					} else {
						nz = NewNoise(l, src)
					}
					v2 := goldenDraw(nz, n)
					if sumOf(v2) != sumOf(v) {
						t.Errorf("bare %T source (in a rand.Rand %v): %d values differ from the wrapped source's", src, inRand, n)
					}
					ref := gs.make()
					for range cs.calls {
						ref.Uint64()
					}
					if a, b := src.Uint64(), ref.Uint64(); a != b {
						t.Errorf("bare %T source (in a rand.Rand %v): not advanced by the %d Uint64 calls of the wrapped one", src, inRand, cs.calls)
					}
				}
			})
		}
	}
	if t.Failed() && !testing.Short() {
		t.Logf("the table of this sampler:\n%s", joinLines(table))
	}
}

func joinLines(s []string) string {
	out := ""
	for _, l := range s {
		out += "\t" + l + "\n"
	}
	return out
}

// TestGoldenLattices: the golden lattices cover a = 1 and odd a > 1, t large and small.
func TestGoldenLattices(t *testing.T) {
	var a1, aOdd, tSmall, tLarge bool
	for _, gl := range goldenLattices {
		l, err := NewLattice(gl.sigma, gl.bound)
		if err != nil {
			t.Fatal(err)
		}
		a1 = a1 || l.a == 1
		aOdd = aOdd || l.a > 1
		tSmall = tSmall || l.t <= 4
		tLarge = tLarge || l.t >= 16
		if l.a > 1 && l.a%2 == 0 || math.Ldexp(float64(l.a), l.t) != l.Sigma/l.G() {
			t.Errorf("lattice %+v: sigma'/G is not a 2^t", l)
		}
	}
	if !a1 || !aOdd || !tSmall || !tLarge {
		t.Errorf("golden lattices: a = 1 %v, odd a > 1 %v, t <= 4 %v, t >= 16 %v; want all", a1, aOdd, tSmall, tLarge)
	}
}

// goldenWant is the table of TestNoiseGolden, lattice by lattice, source by source: the first
// values, the sha256 of goldenShort and goldenDraws values, and the Uint64 calls by then.
var goldenWant = []golden{
	{[]int64{-455998, -197833, 381386, -491901}, "e28166bf5bc8a9e99606370f794b6bdb7fbbc0bddb8ea9f3baf23850b1216784", "d79bc32ca5d12f8941197a5d502fbb2fc73eb94386dd55dfbb0e8e49751aacd3", 15186, 304412},
	{[]int64{-19950, -396440, -480716, 206663}, "84233ed4d7b65579ffa68175742050de174d078ba3b169b387e0e022e0d4e960", "004b0d0e22c23c80d82fdaed8e00c1902bddd6b18b2f17701e64af2c745a90e1", 15073, 304042},
	{[]int64{-238860, 408672, -50462, 43996}, "3424df49e2e93603fa56f30102ea9866f6dfbdd99a1460c4ce74cd13ad85407d", "e3a2b4ed1f74ae18b392b2211167a479294a0c64fa6be91ac5e5c6964a501dcf", 15246, 304368},
	{[]int64{-71702, -323558, 10803, 215434}, "52d801a439c924254e275b3880af8cda1ec9331854bfacf739cbe30bec978d44", "c74af509b710440cf4615a8cc1859d60e270a465fd8888a05cfb5f59bbaab5b5", 15304, 304208},
	{[]int64{302993, -56446, 350318, 139236}, "3d8f37e5571030171de2e3f2b4063edea2baacd6f28e236b92c1e427c74da23a", "99670afb393834509653df41107cbb2c415762be78806065fa2669aad9727ad9", 15370, 304361},
	{[]int64{290249, 37929, -133128, -72052}, "d25c28cabaab50a8ab9dee7969ca937fc08ec68cbbc99bd6aee0b9064efaa3e0", "76c7bc78b249a1edcac9d92a323a5b2bf2c9deef494baefa1e65af18e3cb4516", 15348, 304791},
	{[]int64{-56, -24, 47, -60}, "a6b79cba435626128b4ae0ea4cf8a167274e73f470ed7ecfe217703c154a3ef5", "21d1d36578007add8b254246811ac4fa42db4a7f38923820f236cfc0293e45ff", 15186, 304412},
	{[]int64{-2, -48, -59, 25}, "a3b0a0a55581f2051ef2b3ec687f823374b3ba78c51af9fd02956e63ebe9650c", "0214432d51c7814132e9229c8af03391157f863e16237fe439079f02c2850546", 15073, 304042},
	{[]int64{-29, 50, -6, 5}, "da5f0a38ed116254a5a0e8201b06970e4d5ad620e100ed1e1b275ae9b2edf814", "965b1187662d3afc4fe49b8eb5d77e2fa9d2b345838be606d3568d6b7252b9cc", 15246, 304368},
	{[]int64{-9, -39, 1, 26}, "2020940787c518e0c21ec039a7afddec037d89302c69ba613b72ab121718eba4", "c79d35037765f1793fe5ca62611bee16f59a0c856df8acc4e8f558b30cf887a3", 15304, 304208},
	{[]int64{37, -7, 43, 17}, "50110b84319eaea1ace94888127965daf75753253fcdd373ddb99eb9de167d2b", "58e217041b6798ff4006e493b6991c4a0bae01ad7311328b5d4eb20d6e7890b3", 15370, 304361},
	{[]int64{35, 5, -16, -9}, "763ecd3510ace61279a380f5bb46da6431286e8c60f134cbca8b8ae23ecb16ee", "0abcc26f80212bbfa0c1540fa163a4a64bc7b17cbe6bcad23ccfd39a1caf0ab4", 15348, 304791},
	{[]int64{-553153, -239984, 462644, -596706}, "27feb895d7ecee7f4de8bdffefc24e86f8ee6ef53e637723ec1c5292ce64c484", "5b6078095fb70bbb8acd07457327cd0de5e59ad03b8e6600fde70a5f0860498b", 15186, 304377},
	{[]int64{-24200, -480907, -583138, 250695}, "f8e87d359d11525591481b5c8ce96e1df0a7fb8ff4a7f156073dffcbf1b5305a", "e574faedd549c0c1a38fd81483fad6542270b166d726fa92cc5a98237be6d3ec", 15072, 304004},
	{[]int64{-289751, 495744, -61213, 53370}, "25ef48f072efac13d3e1b9abf58a9f1179da1a47b7f7591393e88f7e0ed73495", "6744478dacd8a4814be0c23e360bf7b32523c0af7b7747991f19a9456ad08ed5", 15246, 304544},
	{[]int64{-86979, -392496, 13105, 261334}, "abed4793ea21ffe502eea50cddaff4ecb3f10b44ff9d816c7252d28d329e22fb", "23167990012a600c78eb152d02cbf271c56a6955e080612a0a0f5d7a14c37bbe", 15315, 304264},
	{[]int64{367549, -68472, 424957, 168902}, "5af30d509415199c6b6d1d871419eca5b58047f63bbbb096b53f857aaddb480a", "23607ce033f6ca6f7dd89a5ba4d9e27d3b5470d4fb0735a67f434ab0e2893e92", 15370, 304337},
	{[]int64{352090, 46010, -161493, -87404}, "f2dccb27c6c701122990197d8052cab54f4101829f643106ea6120eb98678c8d", "83b9066dc43c2cf33c8d62390cc5f38b89b733550aa63b35c867d0103313f7cf", 15348, 304801},
	{[]int64{-540, -234, 452, -583}, "6cb833e8208dcc451ad5049b55b854281ad7f13cb9313f5239928ee6e04093f0", "1db2c287d7a024fde40fadf9c26ccc7baba6853633b3a72f6de5aa361f34fc35", 15186, 304412},
	{[]int64{-24, -470, -569, 245}, "c3f5e4359ff9922ae416350d8bb9c4d0571ee1825f5969d2936c733c1d96fae9", "0e4f0799104f42e1b6405f7ea74be70e55adf1d74469592389601afdc4f06a85", 15073, 304042},
	{[]int64{-283, 484, -60, 52}, "a4c384dab5108ebb2317a3c9758f4b05e0273b81c9d2b248ebd497eb5be1b010", "bf0e9c21de24d3453e64fc9516da155fe1b3a358953694f693ac3e7a0a2cec30", 15246, 304368},
	{[]int64{-85, -383, 13, 255}, "3d1a13e0e2b8d3fc437114fcd0489155f3044f55b6fc8e300b412f72f78a1601", "837a45f41dd8c070c085b9c8d5da7ace7be7c75898b6cd5677f97c5439c04504", 15304, 304208},
	{[]int64{359, -67, 415, 165}, "0a364a3578b378e42f882358e56afab60a87b2009544da5d970cfd8556527d8d", "3912f0c5263bab99ad28d58d411f43b68d8bbe5b18b0fc0158e65ec11bbc4283", 15370, 304361},
	{[]int64{344, 45, -158, -85}, "8a93d12021c24c8373c1cdca84d08be9ca0bf8a60d2d57083dab8d22dc866886", "2668ac2a6d8052131490fef13fc5f1557dbc90f6c8bc4e6a02a063b1bb528d3e", 15348, 304791},
	{[]int64{-720065, -312398, 602245, -776758}, "ee2fcb3e4e86355e068b779e566eb784501f4e87ad117bc65a83941007980026", "f7b8bb9803523e989d67ba9155c7c0c007b29e0dea3454b5d87f50da8c7e31b4", 15189, 304436},
	{[]int64{-31502, -626018, -759097, 326341}, "cb6817221a44bbbcbd984906842233ec5c0024e789a8ae40e1b50ad0250787ce", "b8a03b6bcc74ae735d2d27b57eb43d581608655ced1198da7a9b5b1bcb516014", 15073, 304456},
	{[]int64{-377182, 645332, -79684, 69474}, "418855d82868903ebd36a3fc4f05caa9b7af49edd43386e09fe0039d48bec34e", "9e67707ff58a49386c72e72094d0003b233265d93b8ef639b5b2975318435210", 15246, 303940},
	{[]int64{-113224, -510930, 17059, 340191}, "12daaea366767ff0c1b749f39574e354662c5b9625405db54eece24f988b30b8", "f1706b5719af32860baa578851d09883d0ff469798f10d5a0653778ac89b5a2e", 15304, 304168},
	{[]int64{478455, -89133, 553185, 219867}, "053fa04cc8ded0ba461717182deb489dc1cb7d5a52f498bc878be42d4b3f02dc", "43a3fe19caa97accaae0f24a1644600cf547328645e539dcceb43c68597731ca", 15377, 304445},
	{[]int64{458331, 59893, -210223, -113778}, "2a9ec1ca48c392f0e92a5270de76bb1557b4a600091cab69ead2349a870839ae", "976393579fe99c42981f5f6ed6f2dc15a8f07fae72013a37538f86e481c02ed5", 15348, 305027},
	{[]int64{-504980, -219084, 422353, -544739}, "de8427a79804d945a154d87e6f0a59de15cc3bdd456953f9deb88ee96ae9273e", "d3cf1c5b1da18b98aea789976e5d8eea79ec6675f4c11be1554a71fd1367f9e1", 15186, 304493},
	{[]int64{-22093, -439025, -532353, 228862}, "317dcc4ad7399ba888ecb626061fb0d4ad8d1363b0987aa3dec09043e42f3194", "b919cc1b2d3db36751f90181f74d27ec87dc0c2e5bbbb5ab2d97d6c6d6d559fa", 15073, 304028},
	{[]int64{-264517, 452570, -55882, 48722}, "57ef5d44295eceb93d7d3a694b6f4b56e830fac1e3ea450024eab9b4ae10a936", "0fc2b0502d25c7174be4430504441614a918c492b10d52fa3ecb5152e3667070", 15246, 304324},
	{[]int64{-79404, -358314, 11964, 238575}, "890ac0341753855da3aaca38c5d1b7bd50429656f2ea562276f5e5e329031c18", "b89ff5bfc8acc52374dfccf1ae5a9c08066cd861a821299a81540fae1450343a", 15294, 304088},
	{[]int64{335539, -62509, 387948, 154192}, "95ef77f936d3e6199a553ef345a180203987fd85bb4f3fe99709a2d8b4e884bf", "dcc657331e8c1784eea557b7eaa46136bd001e03418728badb43c93bec235130", 15376, 304290},
	{[]int64{321426, 42003, -147429, -79792}, "6120c4aadb72d3d0fe65b6873422023542dd42dab6f3a4cc794084ab839cbc84", "bb3985be1f165fd99c8f7422332078dbe8c891ac1841b986e4755d2500e387db", 15348, 304945},
	{[]int64{-10687, -4637, 8939, -11529}, "924e21f174d488acfce948ce254026ec48cc737644f4ed30d5fa54e3862f6883", "9c601b25d77093982147fb92c5db1e7b7ef48ec1ae8ef41720746c3d706cc9c3", 15186, 304412},
	{[]int64{-468, -9292, -11267, 4844}, "0724a3499158ce98e69e2549360e81f75ef04e752eb7845b21ea2c47767b477e", "e7a2ef0f0dbf999d85d57824be15d97efd07f253ba25f0b79c0c446bf2fb1b47", 15073, 304042},
	{[]int64{-5598, 9578, -1183, 1031}, "a74c2817aeaf3346998c429dbe3573a5aa9688be190e297b54bda8a5c2e3b3d7", "68ccee25ca600a4014f5e73fbbb925832d68d9b0d3354413e1f788d168161545", 15246, 304368},
	{[]int64{-1681, -7583, 253, 5049}, "2cb24e837101293eca571bcdbd67159e0c2a5d253e9658c09468adddf1f5e635", "65b5936885d080cc9d893375c21092a8d7a732f42349042bef03c57a959afcce", 15304, 304208},
	{[]int64{7101, -1323, 8211, 3263}, "8055c607b12b300bd067df5f3c2d6646c3e29e659e6cc56f075baf147110f898", "ee0d64f9e99ee5e679df314289f9bd3603e2fe42defe3a659ea135b7e9f8a43d", 15370, 304361},
	{[]int64{6803, 889, -3120, -1689}, "6242ed385346f1652dae9f3bee01ea972c94db9a16bef491ea394ae60e2de5f0", "b7c17ef848f72f0d50963d5c1ad91e7588b90fda81ba53381ac04fc40a2f4577", 15348, 304791},
}
