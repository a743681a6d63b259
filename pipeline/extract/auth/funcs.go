package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"strconv"
	"strings"
	"text/template"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
	secpecdsa "github.com/decred/dcrd/dcrec/secp256k1/v4/ecdsa"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/crypto/sha3"
)

// Funcs are the functions of the templates of a signed request (type
// template). Digests and signatures return raw bytes (as a string); hex,
// b64 and b64url encode them. No function's error quotes its arguments,
// not even an algorithm's name: a secret given in its place (arguments
// swapped) would be printed by config check. The error names the call
// as the template has it.
//
//	hash ALG TEXT              digest: md5 sha1 sha256 sha384 sha512 keccak256
//	hmac ALG KEY TEXT          HMAC with one of the hashes above
//	hex / b64 / b64url BYTES   encode (b64url: unpadded URL alphabet)
//	unhex / unb64 TEXT         decode (a base64 secret, a hex key)
//	ed25519 KEY TEXT           Ed25519 signature; KEY is PEM (PKCS#8) or 32/64 raw bytes
//	rsa ALG KEY TEXT           RSA PKCS#1 v1.5 signature of the ALG digest; KEY is PEM
//	eip191 KEY TEXT            Ethereum personal_sign (EIP-191) with a secp256k1 key
//	                           (hex, 0x optional): 65 bytes r‖s‖v, v 27 or 28
//	jwt ALG KEY CLAIMS [HEAD]  a signed JWT (ES256 ES384 EdDSA RS256 RS512 PS256 HS256
//	                           HS512); CLAIMS and HEAD are dicts (HEAD adds header fields)
//	dict K V …, list V …       values for jwt and json
//	json V                     V as compact JSON
//	form K V …                 K=V pairs, URL-encoded, in the order given
//	random N                   N random bytes, hex-encoded
//	add A B, upper, lower      small helpers
var Funcs = template.FuncMap{
	"hash":    hashOf,
	"hmac":    hmacOf,
	"hex":     func(b string) string { return hex.EncodeToString([]byte(b)) },
	"b64":     func(b string) string { return base64.StdEncoding.EncodeToString([]byte(b)) },
	"b64url":  func(b string) string { return base64.RawURLEncoding.EncodeToString([]byte(b)) },
	"unhex":   unhex,
	"unb64":   unb64,
	"ed25519": ed25519Sign,
	"rsa":     rsaSign,
	"eip191":  eip191Sign,
	"jwt":     jwtSign,
	"dict":    dict,
	"list":    func(v ...any) []any { return v },
	"json":    toJSON,
	"form":    form,
	"random":  random,
	"add":     add,
	"upper":   strings.ToUpper,
	"lower":   strings.ToLower,
}

var hashes = map[string]func() hash.Hash{
	"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha384": sha512.New384,
	"sha512": sha512.New, "keccak256": sha3.NewLegacyKeccak256,
}

func newHash(alg string) (func() hash.Hash, error) {
	h, ok := hashes[alg]
	if !ok {
		return nil, errors.New("unknown hash (want md5, sha1, sha256, sha384, sha512 or keccak256)")
	}
	return h, nil
}

func hashOf(alg, text string) (string, error) {
	nh, err := newHash(alg)
	if err != nil {
		return "", err
	}
	h := nh()
	h.Write([]byte(text))
	return string(h.Sum(nil)), nil
}

func hmacOf(alg, key, text string) (string, error) {
	nh, err := newHash(alg)
	if err != nil {
		return "", err
	}
	m := hmac.New(nh, []byte(key))
	m.Write([]byte(text))
	return string(m.Sum(nil)), nil
}

func unhex(s string) (string, error) {
	b, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(s), "0x"))
	if err != nil {
		return "", errors.New("unhex: not hexadecimal")
	}
	return string(b), nil
}

func unb64(s string) (string, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return string(b), nil
		}
	}
	return "", errors.New("unb64: not base64")
}

// pemKey parses a PEM private key (PKCS#8, PKCS#1 or SEC 1).
func pemKey(s string) (crypto.PrivateKey, error) {
	block, _ := pem.Decode([]byte(strings.TrimSpace(s)))
	if block == nil {
		return nil, errors.New("the key is not PEM")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, fmt.Errorf("the PEM key (%s) is not a PKCS#8, PKCS#1 or SEC 1 private key", block.Type)
}

func ed25519Key(key string) (ed25519.PrivateKey, error) {
	switch len(key) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed([]byte(key)), nil
	case ed25519.PrivateKeySize:
		return ed25519.PrivateKey(key), nil
	}
	k, err := pemKey(key)
	if err != nil {
		return nil, fmt.Errorf("ed25519: %w (or 32 or 64 raw bytes)", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, errors.New("ed25519: the key is not an Ed25519 key")
	}
	return ek, nil
}

func ed25519Sign(key, text string) (string, error) {
	k, err := ed25519Key(key)
	if err != nil {
		return "", err
	}
	return string(ed25519.Sign(k, []byte(text))), nil
}

var rsaHashes = map[string]crypto.Hash{"sha256": crypto.SHA256, "sha384": crypto.SHA384, "sha512": crypto.SHA512}

func rsaSign(alg, key, text string) (string, error) {
	ch, ok := rsaHashes[alg]
	if !ok {
		return "", errors.New("rsa: unknown hash (want sha256, sha384 or sha512)")
	}
	k, err := pemKey(key)
	if err != nil {
		return "", fmt.Errorf("rsa: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return "", errors.New("rsa: the key is not an RSA key")
	}
	h := ch.New()
	h.Write([]byte(text))
	sig, err := rsa.SignPKCS1v15(rand.Reader, rk, ch, h.Sum(nil))
	if err != nil {
		return "", fmt.Errorf("rsa: %w", err)
	}
	return string(sig), nil
}

// eip191Sign signs text as Ethereum's personal_sign does: keccak256 of
// "\x19Ethereum Signed Message:\n" + len(text) + text, a recoverable
// secp256k1 signature laid out r‖s‖v with v = 27 + the recovery id.
func eip191Sign(key, text string) (string, error) {
	raw, err := hex.DecodeString(strings.TrimPrefix(strings.TrimSpace(key), "0x"))
	if err != nil || len(raw) != 32 {
		return "", errors.New("eip191: the key is not 32 bytes of hex")
	}
	var scalar secp256k1.ModNScalar
	if overflow := scalar.SetByteSlice(raw); overflow || scalar.IsZero() {
		return "", errors.New("eip191: the key is not a secp256k1 private key (it must be above zero and below the curve's order)")
	}
	priv := secp256k1.NewPrivateKey(&scalar)
	h := sha3.NewLegacyKeccak256()
	fmt.Fprintf(h, "\x19Ethereum Signed Message:\n%d%s", len(text), text)
	compact := secpecdsa.SignCompact(priv, h.Sum(nil), false) // [27+recid] r s
	out := make([]byte, 65)
	copy(out, compact[1:])
	out[64] = compact[0]
	return string(out), nil
}

func jwtSign(alg, key string, claims map[string]any, head ...map[string]any) (string, error) {
	m := jwt.GetSigningMethod(alg)
	if m == nil {
		return "", errors.New("jwt: unknown algorithm (want a JWS name: ES256, EdDSA, RS256, HS256…)")
	}
	var k any
	switch {
	case strings.HasPrefix(alg, "HS"):
		k = []byte(key)
	case alg == "EdDSA":
		ek, err := ed25519Key(key)
		if err != nil {
			return "", fmt.Errorf("jwt: %w", err)
		}
		k = ek
	default:
		pk, err := pemKey(key)
		if err != nil {
			return "", fmt.Errorf("jwt: %w", err)
		}
		switch pk.(type) {
		case *ecdsa.PrivateKey, *rsa.PrivateKey:
		default:
			return "", fmt.Errorf("jwt: %s wants an EC or RSA key", alg)
		}
		k = pk
	}
	t := jwt.NewWithClaims(m, jwt.MapClaims(claims))
	for _, h := range head {
		for name, v := range h {
			t.Header[name] = v
		}
	}
	s, err := t.SignedString(k)
	if err != nil {
		return "", errors.New("jwt: the key does not fit the algorithm")
	}
	return s, nil
}

func dict(kv ...any) (map[string]any, error) {
	if len(kv)%2 != 0 {
		return nil, errors.New("dict: want key value pairs")
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		k, ok := kv[i].(string)
		if !ok {
			return nil, fmt.Errorf("dict: key %d is not a string", i/2+1)
		}
		m[k] = kv[i+1]
	}
	return m, nil
}

func toJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", errors.New("json: the value has no JSON form")
	}
	return string(b), nil
}

func form(kv ...any) (string, error) {
	if len(kv)%2 != 0 {
		return "", errors.New("form: want name value pairs")
	}
	var b strings.Builder
	for i := 0; i < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(fmt.Sprint(kv[i])))
		b.WriteByte('=')
		b.WriteString(url.QueryEscape(fmt.Sprint(kv[i+1])))
	}
	return b.String(), nil
}

func random(n int) (string, error) {
	if n < 1 || n > 1024 {
		return "", errors.New("random: want 1 to 1024 bytes")
	}
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b), nil
}

func add(a, b any) (int64, error) {
	x, err1 := toInt(a)
	y, err2 := toInt(b)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return x + y, nil
}

func toInt(v any) (int64, error) {
	switch n := v.(type) {
	case int:
		return int64(n), nil
	case int64:
		return n, nil
	case string:
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return i, nil
		}
	}
	return 0, fmt.Errorf("add: %T is not a whole number", v)
}
