package capacity

import "strconv"

func formatInt(n int64) string { return strconv.FormatInt(n, 10) }

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
