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
// by then. The values were computed with the cell sampler (cells.go) as first written (issue
// 40, sixth stop); those of Karney's Algorithm N, pinned before it, are in git history.
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
// the values drawn and the number of Uint64 calls made on the source are those of the cell
// sampler as first written, drawn through a counting wrapper (a plain rand.Source), from the
// bare source and from the source behind a *rand.Rand (where the sampler takes a path of its
// own for the concrete type), whose next output must then be the one after as many calls. Any
// change to which bits a draw uses, or in what order, fails it.
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
	{[]int64{-430521, 296224, -427209, 166189}, "6046b81b4a478da2bde0e648f4e4c0182dc50f2822682771035c64e6fea9e1c3", "cef731d85a0db06ff2da5ed96ec09b35574763adbb44204879c6741bf068d601", 10191, 203662},
	{[]int64{-686445, -265179, -253235, -29396}, "b10cb125867ee07e7919a0fe61f64306534addf0f380abe61dcdc137e70e4ee1", "68f4f2f5084b53c35fe08f6b8440b6b81c5e705006572f9b32771823b2985737", 10190, 203440},
	{[]int64{53392, 416399, -144814, -85200}, "62f3f03433c75b8681ae3dbf59fe171e9e738408d7b011cda784b59b8ad6336a", "87c9c13cfcfaf5f2648e57929b2a58c35972525e83e5bbd9527463b76623fe3e", 10169, 203503},
	{[]int64{532913, 245099, 177769, 91879}, "3c4f16d9d74df826ab3a4a6c3720bcabe082fdcd783ee82adb269fc3b1071ac5", "6289a44634efb85e0233cfa97d43d95ab002d3f40915aa883d8e5396dda99903", 10187, 203475},
	{[]int64{-288680, -50585, -224714, 531056}, "0da869ae64de61d28cd183f5d57b3dfd50b4c22da0b11064e7dc886bcd163e2f", "53dd2c9e7780a654fe87bc763939858045c52c3142fa263ef009a70d7d76fa68", 10177, 203519},
	{[]int64{-253843, -35179, -67014, 45077}, "98c8ee20ebf3f60d9b8eb5429c12b94c90e2d3e2e8df89e3f323b88ee9efa6ed", "75e04598c23722696dd6e73bee03e4a8cb155a4821bc3a170ebef89fffea3ff6", 10175, 203572},
	{[]int64{-53, 36, -52, 20}, "9efbd2005115b7417e770c3f9f556b19c7ff498bf3f3fac1ec60aca3474fa860", "1658f30b4bad59e37ad15f645868f65ed8007d3e670a220131d1f0db5b9c0731", 10191, 203662},
	{[]int64{-84, -32, -31, -4}, "cff7d2592cede40d1115cb2fb796366e7eb8b2ff008dddf7dfb19c7b31e9acae", "21f644db710ca5105b1a64657a6b87b5b25028ad29f303b5be304ae3beb02eab", 10190, 203440},
	{[]int64{7, 51, -18, -10}, "3e2218565fb9f2658d7a5b4877037e19feebbfcd0b2e8860330b6dae23cb3aa4", "4550d9fec2c372f4e54cd9d1aabf567d67b21a90776736cad1a00d67663e0286", 10169, 203503},
	{[]int64{65, 30, 22, 11}, "33f6d068c5bb08b4d33bfe0ba09e8440c6af000c7894efc3ee2520bf9c7c42d8", "4ea2782a5e2a0d78b5734b55841b7b75551fcfa10a052b85138506044a17e94e", 10187, 203475},
	{[]int64{-35, -6, -27, 65}, "8698b25edb1573046df81a32efc231d7585a38b2297a775658bc5587ebed08bb", "02e9509e9ffd24f5d9e809b6ac5ae5ef92d35fe2a637a967cb9915da557f0683", 10177, 203519},
	{[]int64{-31, -4, -8, 6}, "86828f2164261a0486655b9d201bc1a86fed95c9c964587e2f7a10e57a713335", "5b89ff599cff0697936b2715661232174ad504c244cd24b3f99f333bf0f24013", 10175, 203572},
	{[]int64{-522248, 359338, -518230, 201597}, "98052c438e86b6c10b67fea84d67c2d7019f4d8c4ad9407a91439183bcab0d6f", "5773afc183a1a8ed3c21ec1ae0b67556c6b7e9271acba7df29e83a6eee47964e", 10191, 203660},
	{[]int64{-832699, -321678, -307189, -35659}, "53355913eb5b5847e665bf319193658f46c1abae941d7ab481767584ce277d69", "93028b0ab4218591ff79cfb9b01a25b857c3742d29f2bdc8da52119c3488ca41", 10187, 203462},
	{[]int64{64767, 505117, -175669, -103352}, "d5c7e6ae75de0394f9708622a827ae1ec06041ee3a17088562a25ce31da86a43", "e5911dc722d3a0a202cd61a61292d47a60e258bde0bbe073f056cb6ed069542e", 10167, 203513},
	{[]int64{646457, 297320, 215644, 111455}, "2c4c1b3ef5f77a9f4dc8369bd796791886223c883fa4d0f19a9e5827371e1733", "5a717acd98698c34696b12765977ec046e7e16ce7741d791bef70455e4f08f9f", 10187, 203461},
	{[]int64{-350186, -61362, -272592, 644204}, "a33fef444b2dc185267e7a12213c03bb525b556b03e0970fe1accd1267876173", "eedbad423071a7248073b102fdf7dd8414230d9ab027cd8e3f214081646ee278", 10177, 203521},
	{[]int64{-307928, -42675, -81292, 54681}, "bbfb924a272a54a27d94c03d44908049870177306c90636a06c504e818c6190a", "9fc2c97804c5970621dba2a23141f1a955d8a7ad7bbf8df345c2fe94543441e8", 10175, 203580},
	{[]int64{-510, 351, -506, 197}, "106b049d7af25cc01241b3fd8df3a4096d7fdcfa0565598ad1035f9c38585299", "b7214515adf4af38ab629da94e6b6c537df870c7397c66448c281894686ecd4a", 10191, 203662},
	{[]int64{-813, -314, -300, -35}, "70ecc09a163e5fd13be7835c7253f75881e44e7c17054553e3880787400ee827", "974cedd4c0c20a0877f6d85eb6376051b869aee9f866f8ce3d36a194ec8cf34e", 10190, 203440},
	{[]int64{63, 493, -172, -101}, "b4848b02a3614bed182e06e22363e22545f6a582fa4d1911e24199b9b1b96b50", "d8028b6e1cbae038f2521adadd8d19812252390cae044f50c27c34847802802a", 10169, 203503},
	{[]int64{631, 290, 211, 109}, "80568d0a1bca5393fc0c257bbe34d5b3790518646bbd1fa2cd231b0e8e1dee24", "fd8a80f80f1d4b6be0051926b5d4c9a2ff1985b29ac42d08bc23c3a337c4e543", 10187, 203475},
	{[]int64{-342, -60, -266, 629}, "4588dc664282d3391d2b40ccfe9ad3a91145807c6246377301d116a06bcce09b", "f1fb9cba1af2dc1475b050e677c876989f01bcef4d92028a3bcdf59b9a280894", 10177, 203519},
	{[]int64{-301, -42, -79, 53}, "81a87d95958afcb6b784d72a842720244ac216966f108f68ec9378ebe86c4e3c", "96be25f83a8d9b33974a59e71353c9e246efaecf134d4c9ae34c316a2a2d58c4", 10175, 203572},
	{[]int64{-679834, 467767, -674604, 262428}, "c3f204e0bc93e85e290c3366d30a1ef4d8af120da10112a0efa552ab7f5ca970", "bce8591d2f39aee84726da7f68190a1820faa8a52a158ee649c11c190d4787b5", 10191, 203656},
	{[]int64{-1083962, -418743, -399882, -46419}, "ccd33eac042fa1fe45a164125601fea3b3eb81a8ca819471cd6c5dc529274dfd", "7652fb2323f9f3a7acd3b0079346d0c42dc3228f942b9bd5447792116bae3aba", 10190, 203436},
	{[]int64{84311, 657534, -228676, -134538}, "f6b7a99770717e4b2101e75f4d72aafd7637d4e7d6f947f83743e51db4622800", "d3df8e6a29ec9411d1cac0912960049bc8b7fc01aa09311f42f9033c8b4e6731", 10169, 203503},
	{[]int64{841522, 387035, 280714, 145086}, "4782647e221503c3c34d2c5ced1de25f11c3bbd661bdf22190d0681d88e30d4a", "3f60d27f644191802c1e7b838b747280918957eda5476d4476ecb4bd33f6ebad", 10187, 203475},
	{[]int64{-455853, -79878, -354846, 838589}, "953b3a5ef68609d2a69484c187376561dc3ac96700ec5aaf7d278535ce135e79", "b9b5e785ed05160a39a5c076883a0039bee8624b016ec6856b29d19989423b4d", 10177, 203535},
	{[]int64{-400843, -55552, -105822, 71180}, "47442c0f047e873590f4af2209d6247b3287ba74ef82dd5bc62934777195802b", "d83043193bfe41d7c7d6ce461aca3bf7b34a9a95df95df0240415f291ab2a3d3", 10177, 203581},
	{[]int64{-476766, 328044, -473098, 184040}, "5a4a6788417b88e17df77d953d3247de21926652839b80f73408b4dd837b7cb8", "7b9f5f4460408f8f3cd49af534d5f6387f9baa0118aedb68bfb4c8efe985983e", 10191, 203670},
	{[]int64{-760180, -293664, -280436, -32554}, "1054aaccbd1b7e3c5a4a00125a133a84cc2a54364f71b94689410d477aab4360", "2fd564d6c868942738ff5ad3160fefe3673c46d0bd7a636e55edec98560ee28a", 10190, 203434},
	{[]int64{59127, 461127, -160370, -94351}, "e1bc46513b4e6f2608f9fdc930964b9fc47ef89f3fe71eb5439344c985d5ce95", "b03f2c326edf6090a1af34e91b170fb097f8fafffcb8680c9ff658d1b5e54cd4", 10169, 203509},
	{[]int64{590157, 271427, 196864, 101749}, "f0d03a565b3bb59fb8798819b24fc2722788cfdd75cd52f11b382c189d001d81", "27c45790e545ba1619edc46c61aa44a5530836c28efe414c2c95439c78394f44", 10187, 203471},
	{[]int64{-319689, -56018, -248852, 588101}, "0c9e4526cfadb5f63b5ae2bd35761b342f04d250a9ea1bd244c122ecadacba14", "ea2356145c89a51d0c6b545ea3db048c27882b08d2959710dcdac5520c6938e2", 10178, 203531},
	{[]int64{-281111, -38958, -74213, 49919}, "258768d2f33778b421b403eaf2f0cc28b407d52517311f69efcd0dc2543c5d37", "736ddf77b29e80a91f987672ada45d50ce43629674f5356e9c3812131e53810b", 10175, 203564},
	{[]int64{-10090, 6943, -10013, 3895}, "7ffe7e9529690af22a34848402aeb5541930a359c8f6145718e8e81bc884650d", "aef0b6672edcdced91c4d6c1f686ea526eaf35a44f58adb501f6895f614de2d7", 10191, 203662},
	{[]int64{-16089, -6215, -5935, -689}, "c38bab3027ccdbf765671b4b13f0da80396caea77ef1e95a19e92815ff0cfb07", "14c015a2a5aeb6a799ea49dbca9d710b957ab51f872c59a6bb10100326370ec8", 10190, 203440},
	{[]int64{1251, 9759, -3394, -1997}, "b0a67a184133091d1dacb0f4eec44bc98095f703602986b34bd101968bae169d", "9ab17c63816857f51ce3d3f8e267203fbdc6dd9941a0c795ea103d3da500c053", 10169, 203503},
	{[]int64{12490, 5745, 4166, 2153}, "2cbd2945052f9db76aae7245b6bb035bd1137440bddd683515aaf4425d5f9df6", "1b5171fdbed03962557daee1e322aa8f5e7f533436fc3d9de86e219b3d40c4ce", 10187, 203475},
	{[]int64{-6766, -1186, -5267, 12447}, "5a4f214869c290396bf7b399041139f92dc05adf437c51dfd9763752feefa7df", "4015eb28b97a3ecd2e94d0c307f24ab97979b19ee81aa88cd1fa567bb7123428", 10177, 203519},
	{[]int64{-5949, -825, -1571, 1056}, "455854ee7f13a90efdaedf1b52038a447e8421e212e883b1f22fb7a3fece3055", "079901613e7b02cef556e9c1955bda254455af82883885009a750c87e7c7c211", 10175, 203572},
}
