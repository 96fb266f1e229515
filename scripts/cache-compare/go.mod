// A throwaway module for docs/cache.md's comparison: the candidate stores
// side by side. Not part of nxdns's build (a nested module), so its
// dependencies never reach the product. Run ../cache-compare.sh.
module cachecompare

go 1.26.0

require (
	github.com/hashicorp/golang-lru/v2 v2.0.7
	github.com/maypok86/otter/v2 v2.4.0
)
