package fleet

import "testing"

// The store's, the keepers', the frontier's and the fleet view's tests, run again on a real
// 3-master Redis Cluster through a cluster client: no script, transaction or read crosses a
// slot, and idle detection and counts read per partition.
func TestOnCluster(t *testing.T) {
	onCluster(t,
		TestOpenChecksConfiguration,
		TestOnePartitionOneOwner,
		TestAddIsExactlyOnceAcrossWorkers,
		TestCompleteStatesAndLinks,
		TestRetryWaitsForNotBeforeOnRedisClock,
		TestTakeoverReclaimsAndFences,
		TestPutBackKeepsOrderAndAttempts,
		TestHostBudget,
		TestHostStateFollowsThePartition,
		TestRobotsFollowThePartition,
		TestKeepersShareAndRebalance,
		TestKeeperTakesOverFromDeadWorker,
		TestWorkersShareCrawlAndSurviveADeadOne,
		TestFrontierCrawlsToTheEnd,
		TestFrontierRefusesAfterTakeover,
		TestFrontierDrainsSurplus,
		TestReadViewCountsAndWorkers,
		TestReadViewNoCrawl,
	)
}
