package web

import (
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/nxdns/nxdns/internal/safefile"
)

// PasswordCost is the bcrypt cost of `nxdns hash-password`: about a quarter
// of a second per check on a Raspberry Pi 4, which with the login rate
// limit makes guessing hopeless and a login still quick. bcrypt rather than
// argon2id: its hash is one self-describing string every tool reads
// (htpasswd -B makes the same), and argon2id's memory cost is what a Pi
// running DNS has least of (docs/dashboard.md).
const PasswordCost = 11

// MinPasswordChars is the shortest password `nxdns hash-password` hashes
// (docs/dashboard.md, "The login"): with the login's rate limit of 20
// attempts a minute from all addresses, eight random printable characters
// keep an online guess out of reach for centuries, while a one-character
// password falls in minutes. Counted in characters, not bytes,
// so a passphrase in any script counts what a person typed.
const MinPasswordChars = 8

// maxPasswordFile bounds web.password_file: a bcrypt hash is 60 bytes.
const maxPasswordFile = 4 << 10

// HashPassword is the line web.password_file holds for password.
func HashPassword(password []byte) (string, error) {
	if len(password) == 0 {
		return "", errors.New("empty password")
	}
	if n := utf8.RuneCount(password); n < MinPasswordChars {
		return "", fmt.Errorf("password of %d characters: choose at least %d (a few words are easy to remember and hard to guess)", n, MinPasswordChars)
	}
	if len(password) > 72 {
		// bcrypt reads 72 bytes; a longer password would silently match
		// every password with the same first 72.
		return "", errors.New("password longer than 72 bytes")
	}
	h, err := bcrypt.GenerateFromPassword(password, PasswordCost)
	return string(h), err
}

// LoadPasswordFile reads web.password_file: a regular file of at most
// 4 KiB holding one bcrypt hash (surrounding white space ignored). A FIFO
// or a device fails at once.
func LoadPasswordFile(path string) ([]byte, error) {
	b, err := safefile.ReadFile(path, maxPasswordFile) // a FIFO or a device fails at once
	if err != nil {
		return nil, fmt.Errorf("web.password_file: %w", err)
	}
	hash := bytes.TrimSpace(b)
	if _, err := bcrypt.Cost(hash); err != nil {
		return nil, fmt.Errorf("web.password_file: %s does not hold a bcrypt hash (make one with nxdns hash-password): %w", path, err)
	}
	return hash, nil
}
