package migrate

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CreateClasses creates the missing CSI counterparts of the plan's legacy
// StorageClasses. It never edits a class: their parameters are immutable,
// and a class of that name that differs is reported as a failure.
func CreateClasses(ctx context.Context, c kubernetes.Interface, plan *Plan) []Result {
	var out []Result
	for _, ci := range plan.StorageClasses {
		res := Result{PV: "StorageClass " + ci.CSI, Claim: "for " + ci.Legacy}
		switch ci.State {
		case "Exists":
			res.Outcome = OutcomeDone
		case "Conflict":
			res.Outcome, res.Reason = OutcomeFailed, ci.Reason+": not edited (parameters are immutable); delete or rename it"
		default:
			_, err := c.StorageV1().StorageClasses().Create(ctx, ci.Object, metav1.CreateOptions{})
			switch {
			case err == nil:
				res.Outcome = OutcomeMigrated
			case apierrors.IsAlreadyExists(err):
				// A concurrent run made it; the next plan checks it.
				res.Outcome = OutcomeDone
			default:
				res.Outcome, res.Reason = OutcomeFailed, fmt.Sprintf("create StorageClass %s: %v", ci.CSI, err)
			}
		}
		out = append(out, res)
	}
	return out
}
