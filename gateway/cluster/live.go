package cluster

import "github.com/gatehouse-dev/gatehouse/gateway/live"

// Live is cluster mode as GET /api/v1/gates and the overview show it: the
// mode in force (live.ClusterRedisOK, or the fail mode while Redis is away),
// this replica's id and the live replicas last seen.
func (c *Controller) Live() *live.Cluster {
	v := &live.Cluster{Mode: live.ClusterRedisOK, ReplicaID: c.replica, Replicas: c.Replicas(), Degraded: c.Degraded()}
	if v.Degraded {
		v.Mode = c.mode.String()
	}
	return v
}
