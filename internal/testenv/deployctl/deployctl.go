// Package deployctl plays the deployment controller for tests on kubeenv's API server, which
// runs no controller manager: without it no deployment ever reports available, and a Helm
// install that waits for readiness would never finish.
package deployctl

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// MarkAvailable writes the status the deployment controller would once the deployment's pods
// are up, for its current generation. A deployment not created yet is left for the next look
// (call it from a wait loop); an update that meets a newer version is too.
func MarkAvailable(t testing.TB, cs kubernetes.Interface, ns, name string) {
	t.Helper()
	deps := cs.AppsV1().Deployments(ns)
	dep, err := deps.Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if dep.Status.ObservedGeneration == dep.Generation && dep.Status.AvailableReplicas == *dep.Spec.Replicas {
		return
	}
	n := *dep.Spec.Replicas
	dep.Status = appsv1.DeploymentStatus{
		ObservedGeneration: dep.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: "True", Reason: "MinimumReplicasAvailable"},
			{Type: appsv1.DeploymentProgressing, Status: "True", Reason: "NewReplicaSetAvailable"},
		},
	}
	if _, err := deps.UpdateStatus(t.Context(), dep, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
		t.Fatal(err)
	}
}
