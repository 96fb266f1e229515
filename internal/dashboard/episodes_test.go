package dashboard

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func getPage(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d: %s", url, resp.StatusCode, b)
	}
	return string(b)
}

func TestUpstreams_episodesAreServedNewestFirstPerUpstream(t *testing.T) {
	base, _ := serve(t, 0)
	var u UpstreamsJSON
	getJSON(t, base+"/api/upstreams", 200, &u)
	if len(u.Upstreams) != 1 {
		t.Fatalf("upstreams %+v", u.Upstreams)
	}
	eps := u.Upstreams[0].Episodes
	if len(eps) != 2 {
		t.Fatalf("episodes %+v, want the pool upstream's two", eps)
	}
	ongoing, ended := eps[0], eps[1]
	if !ongoing.Ongoing || ongoing.End != nil || ongoing.DurationS != 600 || ongoing.Cause != "network error" {
		t.Errorf("ongoing episode %+v", ongoing)
	}
	if ended.Ongoing || ended.End == nil || ended.DurationS != 95 || ended.Failures != 6 ||
		!ended.Start.Equal(now.Add(-3*time.Hour)) || ended.Cause != "attempt timeout" {
		t.Errorf("ended episode %+v", ended)
	}
}

func TestUpstreamsPage_showsTheTimelineAndTheEpisodesEscaped(t *testing.T) {
	base, _ := serve(t, 0)
	body := getPage(t, base+"/upstreams")
	if strings.Contains(body, "<script>alert(1)") {
		t.Fatal("an episode's detail went into the page as markup")
	}
	if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the detail is not shown as text")
	}
	if n := strings.Count(body, `<rect class="backoff`); n != 2 {
		t.Errorf("%d episode stretches on the timeline, want 2 (both in the last 24 h)", n)
	}
	if !strings.Contains(body, `<rect class="backoff ongoing"`) || !strings.Contains(body, `<tr class="ongoing">`) {
		t.Error("the ongoing episode is not marked")
	}
	for _, want := range []string{"1 min 35 s", "10 min 0 s", "attempt timeout"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(body, "192.0.2.99") {
		t.Error("an upstream no longer in the pool is shown")
	}
}

func TestTimelineSVG_placesEpisodesOnTheStrip(t *testing.T) {
	from := now.Add(-24 * time.Hour)
	end := now.Add(-12 * time.Hour)
	svg := string(timelineSVG([]EpisodeJSON{
		{Start: now.Add(-30 * time.Hour), End: &end, DurationS: 18 * 3600}, // began before the strip: clipped at its start
		{Start: now.Add(-time.Second), Ongoing: true, DurationS: 1},        // a second: still shows, at the edge
	}, from, now))
	if !strings.Contains(svg, `<rect class="backoff" x="0.0" y="0" width="360.0"`) {
		t.Errorf("clipped episode misplaced: %s", svg)
	}
	if !strings.Contains(svg, `<rect class="backoff ongoing" x="717.0" y="0" width="3.0"`) {
		t.Errorf("short ongoing episode misplaced: %s", svg)
	}
}
