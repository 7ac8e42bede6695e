// Package pgsearchclient implements the SessionQuery seam over pgsearch's HTTP API.
//
// The JSON field names are the seam's, so the implementation is one HTTP call; the
// bearer token pins the workspace (and maybe one session) on the server side.
package pgsearchclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

type SessionQueryRequest struct {
	Query      string   `json:"query"`
	Kinds      []string `json:"kinds,omitempty"`
	Roles      []string `json:"roles,omitempty"`
	ToolName   string   `json:"tool_name,omitempty"`
	SessionID  string   `json:"session_id,omitempty"`
	Limit      int      `json:"limit,omitempty"`
	Cursor     string   `json:"cursor,omitempty"`
	PerSession *bool    `json:"per_session,omitempty"`
}

type SessionMatch struct {
	SessionID string    `json:"session_id"`
	EntryID   string    `json:"entry_id"`
	Seq       int       `json:"seq"`
	Kind      string    `json:"kind"`
	Turn      int       `json:"turn"`
	Role      string    `json:"role"`
	Excerpt   string    `json:"excerpt"`
	CreatedAt time.Time `json:"created_at"`
	Score     float64   `json:"score"`
}

type SessionQueryResult struct {
	Matches    []SessionMatch `json:"matches"`
	Searched   int            `json:"searched"`
	NextCursor *string        `json:"next_cursor"`
}

// Client is a SessionQuery backed by `pgsearch serve` at BaseURL.
type Client struct {
	BaseURL, Token string
	HTTP           *http.Client
}

func (c *Client) Search(ctx context.Context, req SessionQueryRequest) (SessionQueryResult, error) {
	var out SessionQueryResult
	body, err := json.Marshal(req)
	if err != nil {
		return out, err
	}
	r, err := http.NewRequestWithContext(ctx, "POST", c.BaseURL+"/v1/search", bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	r.Header.Set("Authorization", "Bearer "+c.Token)
	r.Header.Set("Content-Type", "application/json")
	resp, err := c.HTTP.Do(r)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return out, fmt.Errorf("pgsearch: %d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}
