"""sroce-fabric: hosts and a multipath leaf/spine fabric of network namespaces
on one machine, with loss, ECN marks, rate and delay per link direction."""
