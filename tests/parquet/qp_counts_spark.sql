-- Per capture and per destination QP (one direction of traffic to one QP, as
-- `roce flows` keys a flow): the requests sent to it again (a request PSN seen
-- before on the same flow), and the NAKs and RNR NAKs it received.
SELECT capture,
       `roce.flow` AS flow,
       src_qp,
       count(CASE WHEN `roce.opcode.role` = 'request' THEN 1 END)
         - count(DISTINCT CASE WHEN `roce.opcode.role` = 'request'
                               THEN `infiniband.bth.psn` END) AS retransmissions,
       count(CASE WHEN `roce.aeth.type` = 'NAK' THEN 1 END) AS naks,
       count(CASE WHEN `roce.aeth.type` = 'RNR NAK' THEN 1 END) AS rnr_naks
FROM (
  SELECT *,
         -- UD flows are told apart by their source QP too.
         CASE WHEN `roce.transport` = 'UD' THEN `infiniband.deth.srcqp` END AS src_qp
  FROM frames
  -- CM and other MADs are not requests of a flow.
  WHERE `roce.flow` IS NOT NULL AND `infiniband.mad.mgmtclass` IS NULL
) AS roce
GROUP BY capture, `roce.flow`, src_qp
ORDER BY capture, flow, src_qp
