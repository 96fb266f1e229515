package dashboard

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const openapiFile = "../../docs/reference/openapi.json"

var updateOpenAPI = flag.Bool("update", false, "rewrite docs/reference/openapi.json from the code")

// The API's documentation besides what reflection finds: a summary per
// route and a description per parameter. A route or parameter without one
// fails the test.
var (
	routeDocs = map[string]struct {
		summary string
		body    any
	}{
		"GET /api/overview":  {"Totals, blocked share, cache hit rate, series over time, top clients, domains and blocked names, per-upstream answers and latency for [from, to), from the pre-aggregated buckets (minute buckets up to two days, hour buckets beyond; the range is rounded out to whole buckets).", OverviewJSON{}},
		"GET /api/queries":   {"Stored queries, newest first, filtered; every field of the query event and why it was answered that way. Paginated with next/before. A search that runs out of its 3 s budget returns what it found with partial=true and a next cursor that continues it.", QueriesJSON{}},
		"GET /api/clients":   {"Clients seen in [from, to) with their query counts, and the clients named in [[clients]].", ClientsJSON{}},
		"GET /api/upstreams": {"The serving pool's upstreams: health, backoff, slots in use, attempt counters since the last reload, and their answers over the last 24 hours from the history.", UpstreamsJSON{}},
	}
	paramDocs = map[string]string{
		"from":   "Start of the range, RFC 3339 or unix seconds. Default: a day before to. The range is at most 366 days.",
		"to":     "End of the range (exclusive), RFC 3339 or unix seconds. Default: now.",
		"top":    "Length of each top list, 1 to 100. Default 10.",
		"client": "A client's address or its name (case-insensitive), exact.",
		"name":   "A substring of the query name, case-insensitive; at most 255 bytes.",
		"source": "Exact source: pool, cache, stale, local, blocked, refused, server, or zone:NAME.",
		"rcode":  "Exact answer code: NOERROR, NXDOMAIN, SERVFAIL, REFUSED, …, or none (no answer sent).",
		"limit":  "Rows per page, 1 to 500. Default 50.",
		"before": "The next cursor of the previous page: only older rows.",
	}
)

// TestOpenAPI_matchesTheServedRoutesAndFields: docs/reference/openapi.json
// is exactly what the served routes, their parameters and the Go types of
// their answers say. `go test ./internal/dashboard -run OpenAPI -update`
// rewrites it after a change.
func TestOpenAPI_matchesTheServedRoutesAndFields(t *testing.T) {
	d := New(Deps{})
	routes := slices.Sorted(maps.Keys(d.apiRoutes()))
	if docs := slices.Sorted(maps.Keys(routeDocs)); !slices.Equal(routes, docs) {
		t.Fatalf("served API routes %v, documented %v", routes, docs)
	}
	if ps := slices.Sorted(maps.Keys(routeParams)); !slices.Equal(routes, ps) {
		t.Fatalf("routes with parameter lists %v, served %v", ps, routes)
	}
	want := buildOpenAPI(t, routes)
	if *updateOpenAPI {
		if err := os.WriteFile(openapiFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(openapiFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what the code serves; run go test ./internal/dashboard -run OpenAPI -update and review the diff", openapiFile)
	}
}

func buildOpenAPI(t *testing.T, routes []string) []byte {
	paths := map[string]any{}
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		var params []any
		for _, p := range routeParams[r] {
			desc, ok := paramDocs[p]
			if !ok {
				t.Fatalf("parameter %s of %s has no description", p, r)
			}
			params = append(params, map[string]any{"name": p, "in": "query", "required": false, "description": desc, "schema": map[string]any{"type": "string"}})
		}
		op := map[string]any{
			"summary": routeDocs[r].summary,
			"responses": map[string]any{
				"200": map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": schemaOf(reflect.TypeOf(routeDocs[r].body))}}},
				"400": map[string]any{"description": "A parameter is unknown, repeated, malformed or out of range; the body says which.", "content": map[string]any{"application/json": map[string]any{"schema": errorSchema}}},
				"401": map[string]any{"description": "web.password_file is set and the request has no session: log in at /login."},
				"403": map[string]any{"description": "No password is set and web.listen is not a loopback address."},
			},
		}
		if params != nil {
			op["parameters"] = params
		}
		paths[path] = map[string]any{strings.ToLower(method): op}
	}
	doc := map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{
			"title":       "nxdns history API",
			"version":     "1",
			"description": "Served on web.listen. With web.password_file set every route needs the session cookie of a login at /login (mutating routes also the X-CSRF-Token header); without one they are served only on a loopback web.listen. Generated from internal/dashboard by its OpenAPI test.",
		},
		"paths": paths,
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

var errorSchema = map[string]any{"type": "object", "properties": map[string]any{"error": map[string]any{"type": "string"}}}

// schemaOf is the JSON schema of what encoding/json makes of t.
func schemaOf(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[time.Time]() {
		return map[string]any{"type": "string", "format": "date-time"}
	}
	switch t.Kind() {
	case reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			props[name] = schemaOf(f.Type)
		}
		return map[string]any{"type": "object", "properties": props}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	}
	panic("openapi: no schema for " + t.String())
}

// TestOpenAPI_servedFieldsAreTheDocumentedOnes: a real answer of each
// route has exactly the documented top-level fields (omitempty ones may be
// absent), so a field the handler adds outside the types fails.
func TestOpenAPI_servedFieldsAreTheDocumentedOnes(t *testing.T) {
	base, _ := serve(t, 20)
	for r, doc := range routeDocs {
		_, path, _ := strings.Cut(r, " ")
		var got map[string]any
		getJSON(t, base+path, 200, &got)
		props := schemaOf(reflect.TypeOf(doc.body))["properties"].(map[string]any)
		for k := range got {
			if _, ok := props[k]; !ok {
				t.Errorf("%s serves %q, which the document lacks", r, k)
			}
		}
	}
}
