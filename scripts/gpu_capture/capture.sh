#!/bin/bash
# Capture real GPU tool outputs for tests/fixtures on a lent GPU machine. Usage: OUT=dir bash capture.sh
cd "$(dirname "$0")"
nvidia-smi > $OUT/nvidia-smi_1xH200_idle.txt 2>&1
nvidia-smi -q > $OUT/nvidia-smi_q_1xH200_idle.txt 2>&1
nvidia-smi -q -x > $OUT/nvidia-smi_q_x_1xH200_idle.xml 2>&1
nvidia-smi topo -m > $OUT/nvidia-smi_topo_m_1xH200.txt 2>&1
GPM="--gpm-metrics 1,2,3,5,10"
nvidia-smi dmon -c 1 $GPM > $OUT/run.log 2>&1 || GPM=""
echo "GPM=$GPM" >> $OUT/run.log
timeout 70 nvidia-smi dmon -s pucvmet $GPM -o T > $OUT/nvidia-smi_dmon_gpm_1xH200_copy_gemm_gemv.txt 2>&1 &
sleep 1
python3 load.py 8 $OUT/nvidia-smi_q_perf_1xH200_under_bf16_gemm.txt >> $OUT/run.log 2>&1
pkill -INT -f "nvidia-smi dmon"; wait
PYTHONUNBUFFERED=1 timeout 150 python3 trace.py /tmp/kineto_rank0.json >> $OUT/run.log 2>&1
gzip -c /tmp/kineto_rank0.json > $OUT/kineto_1xH200_slow_dataloader_nccl_rank0.json.gz
ls -la $OUT >> $OUT/run.log
cat $OUT/run.log | tail -40
cat $OUT/nvidia-smi_dmon_gpm_1xH200_copy_gemm_gemv.txt | head -60
