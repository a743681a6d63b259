package venuesim

// Deterministic pseudo-randomness. Everything the simulator "draws" is a pure
// function of the seed and of what is being decided (an instrument key, a tick,
// a request number), so no RNG state has to be carried around or locked.

// mix64 is the splitmix64 finaliser: a fast, well-distributed 64-bit bijection.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hash2 combines a seed-derived value with one more word.
func hash2(a, b uint64) uint64 {
	return mix64(mix64(a+0x9e3779b97f4a7c15) ^ b)
}

// hash3 combines three words.
func hash3(a, b, c uint64) uint64 {
	return mix64(hash2(a, b) ^ (c * 0xd6e8feb86659fd93))
}

// unit maps a hash to a float64 uniformly distributed in [0, 1).
func unit(h uint64) float64 {
	return float64(h>>11) / (1 << 53)
}

// hashString hashes a string (FNV-1a folded through mix64).
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return mix64(h)
}

// Salts keep independent decisions independent.
const (
	saltWalk uint64 = iota + 1
	saltActive
	saltDeployed
	saltChange
	saltFault
	saltStatus
	saltBody
	saltAccount
	saltPositions
)
