package dashboard

import "net/http"

func (d *Dashboard) pageRoutes() map[string]http.HandlerFunc { return nil }
