package config

import "testing"

// The shipped defaults keep both promises; a file that breaks one gets a
// warning naming the key, and only that one.
func TestWarnings_budgetInequalities(t *testing.T) {
	for _, tc := range []struct {
		attempt, total int
		want           []Code
	}{
		{2000, 4000, nil}, // the defaults: the standby gets exactly one full attempt
		{1000, 2000, nil},
		{1500, 4500, nil}, // 4500 + 500 is exactly the stubs' 5000: still first
		{2500, 4000, []Code{CodeStandbyWithoutAttempt}},
		{2000, 4600, []Code{CodeBudgetOutlastsClients}},
		{2500, 5000, []Code{CodeBudgetOutlastsClients}}, // the old defaults: the field failure of docs/design.md#field-failures
		{4000, 4800, []Code{CodeStandbyWithoutAttempt, CodeBudgetOutlastsClients}},
	} {
		c := Default()
		c.Upstream.AttemptTimeoutMS, c.Upstream.TotalTimeoutMS = tc.attempt, tc.total
		if ps := Validate(c); len(ps) != 0 {
			t.Fatalf("%d/%d: invalid: %v", tc.attempt, tc.total, ps)
		}
		ws := Warnings(c)
		if len(ws) != len(tc.want) {
			t.Errorf("attempt %d total %d: warnings %v, want %v", tc.attempt, tc.total, ws, tc.want)
			continue
		}
		for i, code := range tc.want {
			if ws[i].Code != code {
				t.Errorf("attempt %d total %d: warning %d is %s, want %s", tc.attempt, tc.total, i, ws[i].Code, code)
			}
		}
	}
}

// The defaults are the numbers docs/design.md#config-budgets fixes.
func TestDefault_budgets(t *testing.T) {
	u := Default().Upstream
	if u.AttemptTimeoutMS != 2000 || u.TotalTimeoutMS != 4000 {
		t.Errorf("defaults attempt %d ms, total %d ms; want 2000, 4000", u.AttemptTimeoutMS, u.TotalTimeoutMS)
	}
}
