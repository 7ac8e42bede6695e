// Command search runs one query: PGSEARCH_URL=http://127.0.0.1:8765 PGSEARCH_TOKEN=pgs_... search "cron refactor"
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	client "example.com/pgsearchclient"
)

func main() {
	c := &client.Client{
		BaseURL: os.Getenv("PGSEARCH_URL"),
		Token:   os.Getenv("PGSEARCH_TOKEN"),
		HTTP:    &http.Client{Timeout: 10 * time.Second},
	}
	res, err := c.Search(context.Background(), client.SessionQueryRequest{
		Query: strings.Join(os.Args[1:], " "),
		Limit: 5,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d entries searched\n", res.Searched)
	for _, m := range res.Matches {
		fmt.Printf("%.3f\t%s#%d\t%s\t%s\n", m.Score, m.SessionID, m.Seq, m.Role, m.Excerpt)
	}
}
