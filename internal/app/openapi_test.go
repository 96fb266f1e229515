package app

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPI_documentsEveryServedAPIRoute: docs/reference/openapi.json
// names exactly the /api routes a running App serves (method and path),
// besides /api/health (docs/reference/http.md). The dashboard's own test
// keeps each route's content in step with its code; only here are all the
// features' routes (dashboard, filter, cache) mounted together, so a route
// added in newWeb without documentation fails here.
func TestOpenAPI_documentsEveryServedAPIRoute(t *testing.T) {
	r := newRig(t)
	cfg, _, _ := webConfig(t, r)
	a := r.start(t, cfg)
	var served []string
	for _, p := range a.web.Routes() {
		if _, path, _ := strings.Cut(p, " "); strings.HasPrefix(path, "/api/") {
			served = append(served, p)
		}
	}
	slices.Sort(served)

	b, err := os.ReadFile("../../docs/reference/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(documented)
	if !slices.Equal(served, documented) {
		t.Fatalf("served /api routes\n%v\ndocumented in openapi.json\n%v", served, documented)
	}
}
